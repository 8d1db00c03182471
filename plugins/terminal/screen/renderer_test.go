package screen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRendererMatchesStages checks that Renderer, fed the golden
// transcripts in chunks of every size, commits what the two stages commit
// when they are run by hand on the whole input.
func TestRendererMatchesStages(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "golden", "*.in"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	for _, in := range inputs {
		data, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		f := NewFilter(0)
		var l Lines
		var want []byte
		for _, s := range f.Flush(f.Feed(nil, data)) {
			want = l.Write(want, s)
		}
		wantPartial := l.Partial()
		for _, chunk := range []int{1, 3, 64, len(data)} {
			r := NewRenderer(0)
			var got []byte
			for i := 0; i < len(data); i += chunk {
				got = append(got, r.Write(data[i:min(i+chunk, len(data))])...)
			}
			got = append(got, r.Flush()...)
			if string(got) != string(want) || r.Partial() != wantPartial {
				t.Errorf("%s, chunks of %d: committed %q + partial %q, want %q + %q",
					filepath.Base(in), chunk, got, r.Partial(), want, wantPartial)
			}
		}
	}
}

func TestRenderer(t *testing.T) {
	for _, tc := range []struct {
		name      string
		chunks    []string
		flush     bool
		committed string
		partial   string
	}{
		{name: "lines", chunks: []string{"a\r\nb", "c\r\n"}, committed: "a\nbc\n"},
		{name: "overwrite", chunks: []string{"10%\r20%", "\r30%\r\n"}, committed: "30%\n"},
		{name: "escape across chunks", chunks: []string{"x\x1b[3", "1my\r\n"}, committed: "xy\n"},
		{name: "partial", chunks: []string{"done\r\nprompt"}, committed: "done\n", partial: "prompt"},
		// An unfinished sequence would swallow what comes next; Flush ends it.
		{name: "flush ends a sequence", chunks: []string{"a\x1b]title"}, flush: true, partial: "a"},
		{name: "long line in pieces", chunks: []string{strings.Repeat("z", 10)}, committed: "zzzzzzzz", partial: "zz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRenderer(8)
			var got []byte
			for _, c := range tc.chunks {
				got = append(got, r.Write([]byte(c))...)
			}
			if tc.flush {
				got = append(got, r.Flush()...)
			}
			if string(got) != tc.committed || r.Partial() != tc.partial {
				t.Fatalf("committed %q, partial %q; want %q, %q", got, r.Partial(), tc.committed, tc.partial)
			}
			wantBreak := ""
			if tc.partial != "" {
				wantBreak = tc.partial + "\n"
			}
			if line := r.Break(nil); string(line) != wantBreak {
				t.Fatalf("Break = %q, want %q", line, wantBreak)
			}
		})
	}
}
