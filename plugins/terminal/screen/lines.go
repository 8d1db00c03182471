package screen

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"strings"
	"unicode/utf8"
)

// DefaultMaxLineBytes is the partial-line cap a zero Lines.MaxLineBytes
// selects.
const DefaultMaxLineBytes = 1 << 20

// lineStop marks the bytes that end a plain run in Lines.Write: the cursor
// controls, every other control (dropped, for callers that pass unfiltered
// text) and every non-ASCII byte (checked rune by rune).
var lineStop = func() (t [256]bool) {
	for b := 0; b < 0x20; b++ {
		t[b] = b != '\t'
	}
	for b := 0x7f; b < 0x100; b++ {
		t[b] = true
	}
	return t
}()

// linePass is 1 for the bytes fastLines copies without a second look:
// printable ASCII, TAB, and the line ends it checks itself.
var linePass = func() (t [256]uint8) {
	for b := 0x20; b < 0x7f; b++ {
		t[b] = 1
	}
	t['\t'], t['\r'], t['\n'] = 1, 1, 1
	return t
}()

// Lines renders Text and EraseLine segments into lines the way a terminal
// shows a single row, committing a line at every '\n'. The zero value is
// ready to use.
//
// The line is kept as bytes while the cursor sits at its end, which is all
// of the time for ordinary output, so writing is an append. Only when '\r',
// '\b' or an erase moves the cursor into the line is it switched to a rune
// slice, where overwriting column k is an index operation; it switches back
// at the next commit.
type Lines struct {
	// MaxLineBytes caps the current line: before a rune would make it
	// longer than this many bytes, the line so far is handed out without a
	// newline and the line goes on from an empty buffer, so a stream
	// without newlines cannot grow memory without bound and a long line
	// still arrives byte for byte. What was handed out can no longer be
	// overwritten: a '\r' returns to the start of the rest. Zero selects
	// DefaultMaxLineBytes.
	MaxLineBytes int

	buf    []byte // line content while !edit
	runes  []rune // line content while edit
	nbytes int    // UTF-8 length of runes
	edit   bool
	// moved means the cursor is not at the end of the line, and col holds
	// it. It may lie past the end after an EL 2, in which case the next
	// write pads with spaces, as a terminal's blank cells would show.
	moved bool
	col   int
	// cont means a piece of the current line was handed out at the cap:
	// the line is open even when its buffer is empty.
	cont bool
}

// Write renders s and appends each line it commits, with its '\n', to dst,
// and the pieces of a line longer than MaxLineBytes as the cap hands them
// out, without one.
func (l *Lines) Write(dst []byte, s Segment) []byte {
	switch s.Kind {
	case Text:
		return l.writeText(dst, s.Text)
	case EraseLine:
		l.erase(s.Erase)
	}
	return dst
}

// Partial returns the current, uncommitted line as it is shown.
func (l *Lines) Partial() string {
	if l.edit {
		return string(l.runes)
	}
	return string(l.buf)
}

// Break commits the current line, if it has anything (or a piece of it was
// handed out at the cap), as though a newline had been written, and
// appends it with its '\n' to dst. A terminal would
// go on writing that line; a caller that hands out output in units (one
// command's, say) breaks it so that the next unit starts on a fresh line.
func (l *Lines) Break(dst []byte) []byte {
	if l.length() == 0 && !l.cont {
		l.clear()
		return dst
	}
	return l.commit(dst)
}

func (l *Lines) maxLine() int {
	if l.MaxLineBytes > 0 {
		return l.MaxLineBytes
	}
	return DefaultMaxLineBytes
}

func (l *Lines) writeText(dst []byte, s string) []byte {
	for len(s) > 0 {
		if !l.edit && !l.moved && len(l.buf) == 0 {
			var n int
			dst, n = l.fastLines(dst, s)
			if n > 0 {
				l.cont = false // fastLines consumed whole lines
			}
			if s = s[n:]; len(s) == 0 {
				break
			}
		}
		i := 0
		for i < len(s) {
			c := s[i]
			if !lineStop[c] {
				i++
				continue
			}
			if c < utf8.RuneSelf {
				break
			}
			r, size := utf8.DecodeRuneInString(s[i:])
			if r <= c1Max || (r == utf8.RuneError && size == 1) {
				break
			}
			i += size
		}
		run := s[:i]
		s = s[i:]
		if len(s) > 0 && (s[0] == '\n' || (s[0] == '\r' && len(s) > 1 && s[1] == '\n')) {
			// A CR right before LF moves a cursor the LF resets anyway.
			if s[0] == '\r' {
				s = s[1:]
			}
			s = s[1:]
			if !l.edit && !l.moved && len(l.buf)+len(run) <= l.maxLine() {
				// The common case: a whole line ready to go.
				dst = append(dst, l.buf...)
				dst = append(dst, run...)
				dst = append(dst, '\n')
				l.buf, l.cont = l.buf[:0], false
				continue
			}
			dst = l.put(dst, run)
			dst = l.commit(dst)
			continue
		}
		if len(run) > 0 {
			dst = l.put(dst, run)
		}
		if len(s) == 0 {
			break
		}
		switch c := s[0]; c {
		case '\r':
			l.cr()
		case '\b':
			l.bs()
		default:
			if c >= utf8.RuneSelf {
				r, size := utf8.DecodeRuneInString(s)
				if r == utf8.RuneError && size == 1 {
					dst = l.put(dst, string(utf8.RuneError))
				}
				// else a C1 control: dropped
				s = s[size:]
				continue
			}
			// other controls are dropped
		}
		s = s[1:]
	}
	return dst
}

// fastLines commits the plain lines at the start of s, which must begin a
// fresh line: printable ASCII ended by '\n' or "\r\n". Those are most of
// any output, and for them rendering is copying minus the CRs, done here
// eight bytes at a time. It returns how much of s it consumed; the first
// line it cannot take whole is left for the general path.
func (l *Lines) fastLines(dst []byte, s string) ([]byte, int) {
	// Lines ending within limit+1 bytes fit the cap; looking no further
	// keeps the per-line check out of the loop.
	end := min(len(s), l.maxLine()+1)
	n := len(dst)
	dst = slices.Grow(dst, end+8)
	out := dst[n : n+end+8] // 8 spare bytes for whole-word stores
	w, i := 0, 0
	for ; i+8 < end; i += 8 {
		q := s[i : i+9]
		x := uint64(q[0]) | uint64(q[1])<<8 | uint64(q[2])<<16 | uint64(q[3])<<24 |
			uint64(q[4])<<32 | uint64(q[5])<<40 | uint64(q[6])<<48 | uint64(q[7])<<56
		cr := zeroBytes(x ^ '\r'*ones)
		lf := zeroBytes(x ^ '\n'*ones)
		// Anything but printable ASCII, TAB, CR and LF ends the fast path:
		// a set top bit, a byte below 0x20 that is none of the three, DEL.
		ctl := ^(x + 0x60*ones) & (0x80 * ones) // exact when no top bit is set
		ctl &^= cr | lf | zeroBytes(x^'\t'*ones)
		if x&(0x80*ones)|ctl|zeroBytes(x^0x7f*ones) != 0 {
			break
		}
		if cr != 0 {
			next := lf >> 8 // top bit of byte j: byte j+1 is '\n'
			if q[8] == '\n' {
				next |= 1 << 63
			}
			if cr&^next != 0 {
				break // a CR that moves the cursor
			}
			// Squeeze out each CR: the bytes above it move down by one.
			for m := cr; m != 0; m = (m & (m - 1)) >> 8 {
				low := uint64(1)<<(uint(bits.TrailingZeros64(m))&^7) - 1
				x = x&low | x>>8&^low
			}
		}
		binary.LittleEndian.PutUint64(out[w:w+8], x)
		w += 8 - bits.OnesCount64(cr)
	}
	for ; i < end; i++ {
		c := s[i]
		if linePass[c] == 0 || c == '\r' && (i+1 == end || s[i+1] != '\n') {
			break
		}
		out[w] = c
		if c != '\r' {
			w++
		}
	}
	// Commit up to the last line end; the rest starts a line the general
	// path renders.
	k := strings.LastIndexByte(s[:i], '\n') + 1
	return dst[:n+k-strings.Count(s[:k], "\r")], k
}

// put writes a run of printable runes at the cursor.
func (l *Lines) put(dst []byte, s string) []byte {
	for len(s) > 0 {
		if l.edit || l.moved {
			dst, s = l.putEdit(dst, s)
		} else {
			dst, s = l.putAppend(dst, s)
		}
	}
	return dst
}

// putAppend appends s to the byte line, handing it out at the cap. It
// returns what remains of s after that, so put can re-dispatch.
func (l *Lines) putAppend(dst []byte, s string) ([]byte, string) {
	limit := l.maxLine()
	if len(l.buf)+len(s) <= limit {
		l.buf = append(l.buf, s...)
		return dst, ""
	}
	k := max(limit-len(l.buf), 0)
	for k > 0 && !utf8.RuneStart(s[k]) {
		k--
	}
	if k == 0 && len(l.buf) == 0 {
		// A rune wider than the whole cap still has to go somewhere.
		_, k = utf8.DecodeRuneInString(s)
	}
	l.buf = append(l.buf, s[:k]...)
	s = s[k:]
	if len(s) > 0 {
		dst = l.flush(dst)
	}
	return dst, s
}

// putEdit writes s rune by rune at the cursor of the rune line. It returns
// what remains of s once the line is handed out at the cap.
func (l *Lines) putEdit(dst []byte, s string) ([]byte, string) {
	l.toEdit()
	limit := l.maxLine()
	for i, r := range s {
		col := len(l.runes)
		if l.moved {
			col = l.col
		}
		for len(l.runes) < col {
			l.runes = append(l.runes, ' ')
			l.nbytes++
		}
		size := utf8.RuneLen(r)
		old := 0
		if col < len(l.runes) {
			old = utf8.RuneLen(l.runes[col])
		}
		if l.nbytes > 0 && l.nbytes-old+size > limit {
			return l.flush(dst), s[i:]
		}
		l.nbytes += size - old
		if col < len(l.runes) {
			l.runes[col] = r
		} else {
			l.runes = append(l.runes, r)
		}
		l.col = col + 1
		l.moved = l.col < len(l.runes)
	}
	return dst, ""
}

// toEdit switches the line to its rune form.
func (l *Lines) toEdit() {
	if l.edit {
		return
	}
	l.runes = l.runes[:0]
	l.nbytes = 0
	for _, r := range string(l.buf) {
		l.runes = append(l.runes, r)
		l.nbytes += utf8.RuneLen(r)
	}
	l.buf = l.buf[:0]
	l.edit = true
}

func (l *Lines) length() int {
	if l.edit {
		return len(l.runes)
	}
	return utf8.RuneCount(l.buf)
}

func (l *Lines) cr() {
	l.col = 0
	if l.edit {
		l.moved = len(l.runes) > 0
	} else {
		l.moved = len(l.buf) > 0
	}
}

func (l *Lines) bs() {
	if l.moved {
		if l.col > 0 {
			l.col--
		}
		// Only an EL 2 leaves the cursor past the end, and it also leaves
		// the rune form, so this check is O(1).
		if l.edit && l.col == len(l.runes) {
			l.moved = false
		}
		return
	}
	if n := l.length(); n > 0 {
		l.col, l.moved = n-1, true
	}
}

func (l *Lines) erase(mode int) {
	switch mode {
	case 0:
		if !l.moved {
			return
		}
		if l.col == 0 {
			l.clear() // "\r ESC[K", the usual way to redraw a line
			return
		}
		l.toEdit()
		if l.col < len(l.runes) {
			for _, r := range l.runes[l.col:] {
				l.nbytes -= utf8.RuneLen(r)
			}
			l.runes = l.runes[:l.col]
			l.moved = false
		}
	case 1:
		// The cell under the cursor is erased too (ECMA-48: "up to and
		// including the active position"); the line keeps its length.
		l.toEdit()
		end := len(l.runes)
		if l.moved {
			end = min(end, l.col+1)
		}
		for i, r := range l.runes[:end] {
			l.nbytes -= utf8.RuneLen(r) - 1
			l.runes[i] = ' '
		}
	case 2:
		col := l.col
		if !l.moved {
			col = l.length()
		}
		l.clear()
		if col > 0 {
			l.toEdit()
			l.col, l.moved = col, true
		}
	}
}

// commit appends the whole line and a '\n' to dst and starts a new line.
func (l *Lines) commit(dst []byte) []byte {
	if l.edit {
		for _, r := range l.runes {
			dst = utf8.AppendRune(dst, r)
		}
	} else {
		dst = append(dst, l.buf...)
	}
	l.clear()
	l.cont = false
	return append(dst, '\n')
}

// flush appends the line so far to dst without a newline: the line is at
// the cap and goes on from an empty buffer.
func (l *Lines) flush(dst []byte) []byte {
	if l.edit {
		for _, r := range l.runes {
			dst = utf8.AppendRune(dst, r)
		}
	} else {
		dst = append(dst, l.buf...)
	}
	l.clear()
	l.cont = true
	return dst
}

func (l *Lines) clear() {
	if cap(l.buf) > maxIdleBuf {
		l.buf = nil
	}
	if cap(l.runes) > maxIdleBuf/4 {
		l.runes = nil
	}
	l.buf, l.runes = l.buf[:0], l.runes[:0]
	l.nbytes, l.edit, l.moved, l.col = 0, false, false, 0
}

// SWAR helpers: a uint64 holds eight bytes of text.
const (
	ones = 0x0101010101010101
	low7 = 0x7f7f7f7f7f7f7f7f
)

// zeroBytes sets the top bit of each byte of x that is zero, and clears all
// other bits. Unlike the shorter (x-ones)&^x trick it has no false
// positives, so every set bit can be used as a position.
func zeroBytes(x uint64) uint64 { return ^((x&low7 + low7) | x | low7) }
