package screen

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// checkSegment fails t if s breaks the Segment contract.
func checkSegment(t *testing.T, s Segment) {
	t.Helper()
	switch s.Kind {
	case Text:
		if s.Text == "" {
			t.Fatal("empty Text segment")
		}
		if !utf8.ValidString(s.Text) {
			t.Fatalf("Text %q is not valid UTF-8", s.Text)
		}
		for _, r := range s.Text {
			if (r < 0x20 && r != '\n' && r != '\r' && r != '\b' && r != '\t') || (r >= 0x7f && r <= c1Max) {
				t.Fatalf("Text %q holds control %U", s.Text, r)
			}
		}
	case EraseLine:
		if s.Erase < 0 || s.Erase > 2 {
			t.Fatalf("EraseLine mode %d", s.Erase)
		}
	default:
		t.Fatalf("unknown kind %v", s.Kind)
	}
}

// FuzzFilter checks that any input yields well-formed segments, that the
// split points never change the output, and that the carry stays bounded.
// Because the carry bound is enforced byte by byte, split independence
// holds with a tiny maxPending too (sequences overflow on most inputs), so
// both settings are checked for it.
func FuzzFilter(f *testing.F) {
	f.Add([]byte("a\x1b]133;D;0\x07dsh> \x1b[2K\r\n\xe2\x82\xac"), uint(7))
	f.Fuzz(func(t *testing.T, data []byte, split uint) {
		for _, maxPending := range []int{1 << 20, 4} {
			whole := NewFilter(maxPending)
			var one []Segment
			one = whole.Feed(one, data)
			one = whole.Flush(one)
			for _, s := range one {
				checkSegment(t, s)
			}

			i := int(split % uint(len(data)+1))
			j := i + int(split/uint(len(data)+1)%uint(len(data)-i+1))
			parts := NewFilter(maxPending)
			var three []Segment
			for _, p := range [][]byte{data[:i], data[i:j], data[j:]} {
				three = parts.Feed(three, p)
				if parts.ncarry > utf8.UTFMax-1 || len(parts.pay) > maxPending || parts.in != nil {
					t.Fatalf("maxPending %d: carry %d, payload %d", maxPending, parts.ncarry, len(parts.pay))
				}
			}
			three = parts.Flush(three)
			for _, s := range three {
				checkSegment(t, s)
			}
			if a, b := normalize(one), normalize(three); !reflect.DeepEqual(a, b) {
				t.Fatalf("maxPending %d, split %d/%d:\n whole %s\nsplit %s", maxPending, i, j, dump(a), dump(b))
			}
		}
	})
}

// refLines is a deliberately naive model of Lines: the line is always a
// rune slice and every rune goes through the same path. FuzzLines checks
// Lines against it.
type refLines struct {
	max  int
	line []rune
	col  int
	out  []byte
}

func (r *refLines) bytes() int {
	n := 0
	for _, c := range r.line {
		n += utf8.RuneLen(c)
	}
	return n
}

func (r *refLines) commit() {
	r.flush()
	r.out = append(r.out, '\n')
}

// flush hands out the line so far, as Lines does at the cap.
func (r *refLines) flush() {
	r.out = append(r.out, string(r.line)...)
	r.line, r.col = r.line[:0], 0
}

func (r *refLines) write(s Segment) {
	switch s.Kind {
	case EraseLine:
		switch s.Erase {
		case 0:
			if r.col < len(r.line) {
				r.line = r.line[:r.col]
			}
		case 1:
			for i := 0; i < len(r.line) && i <= r.col; i++ {
				r.line[i] = ' '
			}
		case 2:
			r.line = r.line[:0]
		}
		return
	}
	for _, c := range s.Text {
		switch {
		case c == '\n':
			r.commit()
		case c == '\r':
			r.col = 0
		case c == '\b':
			r.col = max(r.col-1, 0)
		case c < 0x20 && c != '\t', c >= 0x7f && c <= c1Max:
			// dropped
		default:
			for len(r.line) < r.col {
				r.line = append(r.line, ' ')
			}
			old := 0
			if r.col < len(r.line) {
				old = utf8.RuneLen(r.line[r.col])
			}
			// n runes take at most 4n bytes: skip the O(n) count while the
			// cap is out of reach.
			if (len(r.line)+1)*utf8.UTFMax > r.max {
				if n := r.bytes(); n > 0 && n-old+utf8.RuneLen(c) > r.max {
					r.flush()
					old = 0
				}
			}
			if r.col < len(r.line) {
				r.line[r.col] = c
			} else {
				r.line = append(r.line, c)
			}
			r.col++
		}
	}
}

// linesInput turns fuzz bytes into segments: ESC n makes EraseLine(n%4)
// (mode 3 is invalid and must be ignored), everything between is Text.
func linesInput(data []byte) []Segment {
	var segs []Segment
	for len(data) > 0 {
		i := bytes.IndexByte(data, 0x1b)
		if i < 0 {
			return append(segs, tx(string(data)))
		}
		if i > 0 {
			segs = append(segs, tx(string(data[:i])))
		}
		data = data[i+1:]
		if len(data) > 0 {
			segs = append(segs, el(int(data[0]%4)))
			data = data[1:]
		}
	}
	return segs
}

// FuzzLines checks Lines against refLines, whole and split at rune
// boundaries, and the output contract.
func FuzzLines(f *testing.F) {
	f.Add([]byte("abc\rX\n10%\r20%\n\x1b\x01x\x1b\x02y\b\bz\n"), uint8(0), uint(3))
	f.Fuzz(func(t *testing.T, data []byte, maxLine uint8, split uint) {
		limit := DefaultMaxLineBytes
		if maxLine != 0 {
			limit = int(maxLine%40) + 1
		}
		segs := linesInput(data)
		ref := refLines{max: limit}
		for _, s := range segs {
			ref.write(s)
		}

		// The same segments, with one Text split at a rune boundary.
		var split2 []Segment
		for n, s := range segs {
			if s.Kind == Text && uint(n) == split%uint(len(segs)) {
				cut := int(split/uint(len(segs))) % (len(s.Text) + 1)
				for cut > 0 && cut < len(s.Text) && !utf8.RuneStart(s.Text[cut]) {
					cut--
				}
				split2 = append(split2, tx(s.Text[:cut]), tx(s.Text[cut:]))
				continue
			}
			split2 = append(split2, s)
		}

		for _, in := range [][]Segment{segs, split2} {
			l := Lines{MaxLineBytes: int(limit)}
			var out []byte
			for _, s := range in {
				out = l.Write(out, s)
			}
			if !utf8.Valid(out) || bytes.IndexByte(out, '\r') >= 0 {
				t.Fatalf("committed %q: invalid UTF-8 or CR", out)
			}
			p := l.Partial()
			if len(p) > limit && utf8.RuneCountInString(p) > 1 {
				t.Fatalf("partial line of %d bytes over the %d cap: %q", len(p), limit, p)
			}
			if !utf8.ValidString(p) || strings.ContainsAny(p, "\r\n") {
				t.Fatalf("partial %q: invalid UTF-8 or line end", p)
			}
			if string(out) != string(ref.out) || p != string(ref.line) {
				t.Fatalf("segments %s, cap %d:\n got %q + %q\nwant %q + %q",
					dump(in), limit, out, p, ref.out, string(ref.line))
			}
		}
	})
}

// refScrollback is a naive model of Scrollback: a slice of strings,
// trimmed from the front one line at a time.
type refScrollback struct {
	maxLines, maxBytes int
	lines              []string
	partial            string
	partialCut         bool
	dropped            uint64
}

func refTail(s string, n int) string {
	for len(s) > n {
		_, size := utf8.DecodeRuneInString(s)
		s = s[size:]
	}
	return s
}

func (r *refScrollback) size() int {
	n := len(r.partial)
	for _, l := range r.lines {
		n += len(l) + 1
	}
	return n
}

func (r *refScrollback) trim() {
	for len(r.lines) > 0 && (len(r.lines) > r.maxLines || r.size() > r.maxBytes) {
		r.lines = r.lines[1:]
		r.dropped++
	}
}

func (r *refScrollback) append(b string) {
	if b == "" {
		return
	}
	r.partial, r.partialCut = "", false
	b = strings.TrimSuffix(b, "\n")
	for _, l := range strings.Split(b, "\n") {
		if len(l)+1 > r.maxBytes {
			l = refTail(l, r.maxBytes-1)
			r.dropped++
		}
		r.lines = append(r.lines, l)
	}
	r.trim()
}

func (r *refScrollback) setPartial(p string) {
	r.partialCut = len(p) > r.maxBytes
	r.partial = refTail(p, r.maxBytes)
	r.trim()
}

func (r *refScrollback) read(offset, count, maxBytes int) (Page, error) {
	if offset < 0 {
		return Page{}, ErrBadOffset
	}
	if count < 1 {
		return Page{}, ErrBadCount
	}
	all := r.lines
	if r.partial != "" {
		all = append(all[:len(all):len(all)], r.partial)
	}
	lost := r.dropped > 0 || r.partialCut
	if offset >= len(all) {
		return Page{TotalLines: len(all), LineBegin: offset, LineEnd: offset, Truncated: lost}, nil
	}
	end := len(all) - offset
	start := max(0, end-count)
	text := strings.Join(all[start:end], "\n")
	cut := false
	if maxBytes > 0 && len(text) > maxBytes {
		cut = true
		text = refTail(text, maxBytes)
		text = strings.TrimPrefix(text, "\n")
	}
	n := strings.Count(text, "\n") + 1
	if text == "" && all[end-1] != "" {
		n = 0
	}
	return Page{Text: text, TotalLines: len(all), LineBegin: offset, LineEnd: offset + n,
		Truncated: cut || (start == 0 && lost)}, nil
}

// FuzzScrollback runs a program of appends, partial updates and reads
// against Scrollback and refScrollback, checking the bounds after every
// step.
func FuzzScrollback(f *testing.F) {
	f.Add([]byte("\x00\x08ab\ncd\nef\n\x01\x03xyz\x02\x00\x02\x05"), uint8(3), uint8(10))
	f.Fuzz(func(t *testing.T, prog []byte, maxLines, maxBytes uint8) {
		ml, mb := int(maxLines%16)+1, int(maxBytes)+1
		s := NewScrollback(ml, mb)
		ref := refScrollback{maxLines: ml, maxBytes: mb}
		next := func() int {
			if len(prog) == 0 {
				return 0
			}
			b := prog[0]
			prog = prog[1:]
			return int(b)
		}
		take := func() string {
			n := min(next()%48, len(prog))
			b := prog[:n]
			prog = prog[n:]
			return strings.ToValidUTF8(string(b), "\uFFFD")
		}
		var dropped uint64
		for len(prog) > 0 {
			switch next() % 4 {
			case 0:
				b := take()
				s.Append([]byte(b))
				ref.append(b)
			case 1:
				p := strings.ReplaceAll(take(), "\n", "")
				s.SetPartial(p)
				ref.setPartial(p)
			case 2:
				offset, count, limit := next()-8, next()-2, next()-4
				got, err := s.Read(offset, count, limit)
				want, wantErr := ref.read(offset, count, limit)
				if !errors.Is(err, wantErr) || got != want {
					t.Fatalf("Read(%d, %d, %d) = %+v, %v\nwant %+v, %v", offset, count, limit, got, err, want, wantErr)
				}
			case 3:
				// Many short lines at once, the shape Lines produces.
				n := next()
				b := strings.Repeat(strings.Repeat("x", n%5)+"\n", n/5)
				s.Append([]byte(b))
				ref.append(b)
			}
			if s.TotalLines() > ml+1 || s.Bytes() > mb {
				t.Fatalf("bounds: %d lines, %d bytes (max %d, %d)", s.TotalLines(), s.Bytes(), ml, mb)
			}
			if s.Dropped() < dropped {
				t.Fatalf("Dropped went back from %d to %d", dropped, s.Dropped())
			}
			dropped = s.Dropped()
			if s.TotalLines() != len(ref.lines)+boolToInt(ref.partial != "") || s.Bytes() != ref.size() || dropped != ref.dropped {
				t.Fatalf("state: %d lines %d bytes %d dropped, want %d %d %d",
					s.TotalLines(), s.Bytes(), dropped, len(ref.lines), ref.size(), ref.dropped)
			}
		}
	})
}

func boolToInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestLinesMatchesReference compares Lines with refLines on many random
// inputs drawn from the characters that matter, so CI exercises the fast
// paths and their edges (CRs at every offset of an 8-byte word, the cap)
// without running the fuzzer.
func TestLinesMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", "0123456", "\r", "\n", "\r\n", "é", "€", "🎉", "\b", "\t", "\x00", "\x1b\x00", "\x1b\x01", "\x1b\x02"}
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(40) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		limit := []int{DefaultMaxLineBytes, 1, 3, 8, 16}[rng.IntN(5)]
		segs := linesInput([]byte(b.String()))
		ref := refLines{max: limit}
		l := Lines{MaxLineBytes: limit}
		var out []byte
		for _, s := range segs {
			ref.write(s)
			out = l.Write(out, s)
		}
		if string(out) != string(ref.out) || l.Partial() != string(ref.line) {
			t.Fatalf("input %q, cap %d:\n got %q + %q\nwant %q + %q", b.String(), limit, out, l.Partial(), ref.out, string(ref.line))
		}
	}
}
