package screen

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// pipeline is the PTY reader's loop as the sessions run it.
type pipeline struct {
	r  *Renderer
	sb *Scrollback
}

func newPipeline() *pipeline {
	return &pipeline{r: NewRenderer(0), sb: NewScrollback(10000, 4<<20)}
}

func (p *pipeline) feed(chunk []byte) {
	p.sb.Append(p.r.Write(chunk))
	p.sb.SetPartial(p.r.Partial())
}

func runPipeline(b *testing.B, input []byte, chunk int) {
	b.Helper()
	b.SetBytes(int64(len(input)))
	b.ReportAllocs()
	for b.Loop() {
		p := newPipeline()
		for i := 0; i < len(input); i += chunk {
			p.feed(input[i:min(i+chunk, len(input))])
		}
	}
}

// seqOutput is what `seq 1 n` prints through a PTY: CRLF line endings.
func seqOutput(n int) []byte {
	var b []byte
	for i := 1; i <= n; i++ {
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, '\r', '\n')
	}
	return b
}

// coloredOutput resembles `ls --color` and `grep --color`: a few escape
// sequences per line.
func coloredOutput(lines int) []byte {
	var b strings.Builder
	for i := range lines {
		fmt.Fprintf(&b, "\x1b[01;34mdir%d\x1b[0m  \x1b[01;32mrun%d.sh\x1b[0m  file%d.txt  "+
			"\x1b[35m\x1b[Ksrc/main.go\x1b[m\x1b[K:\x1b[32m\x1b[K%d\x1b[m\x1b[K: func \x1b[01;31m\x1b[Kmain\x1b[m\x1b[K()\r\n",
			i, i, i, i)
	}
	return []byte(b.String())
}

// progressOutput resembles a download progress bar: a hundred redraws per
// line, some clearing the line first.
func progressOutput(lines int) []byte {
	var b strings.Builder
	for i := range lines {
		fmt.Fprintf(&b, "Downloading pkg-%d.tar.gz\r\n", i)
		for pct := 0; pct <= 100; pct++ {
			bar := strings.Repeat("█", pct/5) + strings.Repeat(" ", 20-pct/5)
			if pct%10 == 0 {
				b.WriteString("\r\x1b[K")
			} else {
				b.WriteString("\r")
			}
			fmt.Fprintf(&b, "%3d%% |%s| %d/100 kB", pct, bar, pct)
		}
		b.WriteString("\r\n")
	}
	return []byte(b.String())
}

func BenchmarkPipelineSeq100k(b *testing.B) {
	runPipeline(b, seqOutput(100000), 4096)
}

func BenchmarkPipelineColored(b *testing.B) {
	runPipeline(b, coloredOutput(10000), 4096)
}

func BenchmarkPipelineProgress(b *testing.B) {
	runPipeline(b, progressOutput(200), 4096)
}

func BenchmarkFilterSeq100k(b *testing.B) {
	input := seqOutput(100000)
	b.SetBytes(int64(len(input)))
	b.ReportAllocs()
	var segs []Segment
	for b.Loop() {
		f := NewFilter(0)
		for i := 0; i < len(input); i += 4096 {
			segs = f.Feed(segs[:0], input[i:min(i+4096, len(input))])
		}
	}
}

func BenchmarkFilterUTF8(b *testing.B) {
	input := []byte(strings.Repeat("Grüße, 世界! Ünïcödé tëxt → ✓ 🎉\r\n", 20000))
	b.SetBytes(int64(len(input)))
	b.ReportAllocs()
	var segs []Segment
	for b.Loop() {
		f := NewFilter(0)
		for i := 0; i < len(input); i += 4096 {
			segs = f.Feed(segs[:0], input[i:min(i+4096, len(input))])
		}
	}
}

// The stage benchmarks split BenchmarkPipelineSeq100k into its parts.

func seqSegments() []Segment {
	input := seqOutput(100000)
	f := NewFilter(0)
	var segs []Segment
	for i := 0; i < len(input); i += 4096 {
		segs = f.Feed(segs, input[i:min(i+4096, len(input))])
	}
	return segs
}

func BenchmarkLinesSeq100k(b *testing.B) {
	segs := seqSegments()
	b.SetBytes(int64(len(seqOutput(100000))))
	b.ReportAllocs()
	var out []byte
	for b.Loop() {
		var l Lines
		for _, s := range segs {
			out = l.Write(out[:0], s)
		}
	}
}

func BenchmarkScrollbackSeq100k(b *testing.B) {
	var l Lines
	var committed [][]byte
	for _, s := range seqSegments() {
		committed = append(committed, l.Write(nil, s))
	}
	b.SetBytes(int64(len(seqOutput(100000))))
	b.ReportAllocs()
	for b.Loop() {
		sb := NewScrollback(10000, 4<<20)
		for _, c := range committed {
			sb.Append(c)
		}
	}
}
