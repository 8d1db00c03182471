package screen

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.golden from the current output")

// TestGolden runs each testdata/golden/*.in transcript through the whole
// pipeline and compares the segments and the final scrollback with the
// .golden file. Every chunk size must give the same result.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "golden", "*.in"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".in")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			got := goldenRender(data, len(data))
			for _, chunk := range []int{1, 2, 3, 7, 64} {
				if other := goldenRender(data, chunk); other != got {
					t.Fatalf("chunk size %d renders differently:\n%s\nwant\n%s", chunk, other, got)
				}
			}
			path := strings.TrimSuffix(in, ".in") + ".golden"
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Fatalf("output differs from %s (go test -update rewrites it)\n got:\n%s\nwant:\n%s", path, got, want)
			}
		})
	}
}

// goldenRender feeds data in chunks of the given size and describes what
// came out: the segments (adjacent text merged), then the scrollback.
func goldenRender(data []byte, chunk int) string {
	f := NewFilter(64)
	var segs []Segment
	for i := 0; i < len(data); i += chunk {
		segs = f.Feed(segs, data[i:min(i+chunk, len(data))])
	}
	segs = normalize(f.Flush(segs))

	var b strings.Builder
	b.WriteString("-- segments --\n")
	var l Lines
	sb := NewScrollback(1000, 1<<20)
	for _, s := range segs {
		switch s.Kind {
		case Text:
			fmt.Fprintf(&b, "Text %q\n", s.Text)
		case EraseLine:
			fmt.Fprintf(&b, "EraseLine %d\n", s.Erase)
		}
		sb.Append(l.Write(nil, s))
	}
	sb.SetPartial(l.Partial())
	page, err := sb.Read(0, math.MaxInt, 0)
	if err != nil {
		panic(err)
	}
	fmt.Fprintf(&b, "-- scrollback (%d lines) --\n%s\n", page.TotalLines, page.Text)
	return b.String()
}
