package screen

import (
	"strconv"
	"unicode/utf8"
)

// Kind says what a Segment carries.
type Kind uint8

const (
	// Text is printable output. Its Text field is valid UTF-8 and holds no
	// ESC, no C1 control and no C0 control other than '\n', '\r', '\b' and
	// '\t'.
	Text Kind = iota
	// EraseLine is an EL request (CSI n K); Erase holds n.
	EraseLine
)

// String returns the constant's name, for test output and logs.
func (k Kind) String() string {
	switch k {
	case Text:
		return "Text"
	case EraseLine:
		return "EraseLine"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Segment is one unit of filtered output. Only the field named by Kind is
// meaningful.
type Segment struct {
	Kind Kind
	// Text is the printable text of a Text segment.
	Text string
	// Erase is the EL mode of an EraseLine segment: 0 erases from the
	// cursor to the end of the line, 1 from the start of the line through
	// the cursor, 2 the whole line.
	Erase int
}

// DefaultMaxPending is the escape carry bound NewFilter uses when given a
// non-positive one. Only two sequences are ever acted on, EL and CHA, and
// both are a handful of bytes; everything longer is dropped whether or not
// it overflows, so a small bound costs nothing.
const DefaultMaxPending = 4096

// Control characters the state machine branches on.
const (
	bel = 0x07
	can = 0x18 // cancels any sequence in progress
	sub = 0x1a // cancels any sequence in progress, like CAN
	esc = 0x1b
	del = 0x7f

	c1Max = 0x9f // last C1 control rune; they start at 0x80
	c1DCS = 0x90
	c1SOS = 0x98
	c1CSI = 0x9b
	c1ST  = 0x9c
	c1OSC = 0x9d
	c1PM  = 0x9e
	c1APC = 0x9f
)

type state uint8

const (
	stGround    state = iota
	stEsc             // after ESC
	stEscInter        // ESC followed by intermediates (0x20-0x2F), e.g. ESC ( B
	stCSI             // CSI parameters and intermediates
	stString          // OSC, DCS, SOS, PM or APC payload
	stStringEsc       // ESC inside a string: ST if '\' follows
)

// passGround is 1 for the bytes that ground state copies to the output as
// they are: printable ASCII and the four kept controls. Everything else
// needs a decision.
var passGround = func() (t [256]uint8) {
	for b := 0x20; b < 0x7f; b++ {
		t[b] = 1
	}
	for _, b := range []byte{'\n', '\r', '\b', '\t'} {
		t[b] = 1
	}
	return t
}()

// scanBytes returns the index of the first byte of p at or after i whose
// entry in table is 0. It tests eight bytes per branch, several times faster
// than a byte loop on plain text.
func scanBytes(table *[256]uint8, p []byte, i int) int {
	for ; i+8 <= len(p); i += 8 {
		q := p[i : i+8 : i+8]
		if table[q[0]]&table[q[1]]&table[q[2]]&table[q[3]]&
			table[q[4]]&table[q[5]]&table[q[6]]&table[q[7]] == 0 {
			break
		}
	}
	for i < len(p) && table[p[i]] != 0 {
		i++
	}
	return i
}

// Filter turns raw PTY bytes into Segments. It is a streaming UTF-8 decoder
// fused with a VT escape-sequence parser; see the package documentation for
// the model. The zero value is not usable; call NewFilter.
type Filter struct {
	maxPending int

	st state
	// over is discard mode: the sequence has grown past maxPending bytes,
	// its parameters are no longer kept and it will not be acted on.
	over bool
	n    int    // bytes consumed by the sequence in progress
	pay  []byte // CSI parameters, while !over

	carry  [utf8.UTFMax]byte // an incomplete UTF-8 sequence at the end of a Feed
	ncarry int

	// Printable output not yet emitted as a Segment is text followed by
	// in[from:to]. Runs are kept as a range of the input as long as they
	// are contiguous, so plain output is copied once, straight into the
	// Segment's string, instead of once into text and again out of it.
	text     []byte
	in       []byte // the input being processed; nil between calls
	from, to int

	// eol records that, once the first scanned bytes of the pending text
	// are rendered, nothing is at or after the cursor: no '\r' or '\b'
	// since the last '\n'. An EL 0 then erases nothing, and dropping it
	// keeps the text around it in one segment; grep --color writes one
	// after every match. It starts false because the renderer's line may
	// not be fresh. Remembering how far it got keeps each byte scanned
	// once however many ELs a line has.
	eol     bool
	scanned int
}

// NewFilter returns a Filter that carries at most maxPending bytes of an
// unterminated escape sequence between Feeds. A non-positive maxPending
// selects DefaultMaxPending.
func NewFilter(maxPending int) *Filter {
	if maxPending <= 0 {
		maxPending = DefaultMaxPending
	}
	return &Filter{maxPending: maxPending}
}

// Feed filters the next chunk of output and appends the resulting segments
// to dst. Chunk boundaries do not matter: feeding a stream in any split
// yields the same segments, except that text is never coalesced across two
// Feeds.
func (f *Filter) Feed(dst []Segment, p []byte) []Segment {
	if f.ncarry > 0 {
		// Finish the carried rune on a small joined buffer, then continue in
		// p from wherever that left off. Three bytes of p always complete
		// (or invalidate) a carried prefix, so the joined run consumes the
		// whole carry unless p is too short, in which case it is all carried.
		var buf [2 * utf8.UTFMax]byte
		nc := copy(buf[:], f.carry[:f.ncarry])
		n := nc + copy(buf[nc:], p[:min(len(p), utf8.UTFMax-1)])
		var used int
		dst, used = f.run(dst, buf[:n], false)
		f.spill()
		if used < nc {
			f.ncarry = copy(f.carry[:], buf[used:n])
			p = nil
		} else {
			f.ncarry = 0
			p = p[used-nc:]
		}
	}
	dst, used := f.run(dst, p, false)
	if used < len(p) {
		f.ncarry = copy(f.carry[:], p[used:])
	}
	dst = f.emitText(dst)
	f.in = nil // the caller owns p
	return dst
}

// Flush ends the stream: a carried incomplete UTF-8 sequence is decoded (to
// U+FFFD, one per byte), an unterminated escape sequence is dropped, and the
// Filter is reset for a new stream.
func (f *Filter) Flush(dst []Segment) []Segment {
	if f.ncarry > 0 {
		var buf [utf8.UTFMax]byte
		n := copy(buf[:], f.carry[:f.ncarry])
		f.ncarry = 0
		dst, _ = f.run(dst, buf[:n], true)
	}
	f.reset()
	dst = f.emitText(dst)
	f.in, f.eol = nil, false
	return dst
}

// run processes p and returns how much of it was consumed. Everything is
// consumed except an incomplete UTF-8 sequence at the very end, unless final
// is set, which decodes such a tail as invalid bytes.
func (f *Filter) run(dst []Segment, p []byte, final bool) ([]Segment, int) {
	f.in = p
	i := 0
	for i < len(p) {
		if f.st == stGround {
			j := i
			for {
				j = scanBytes(&passGround, p, j)
				if j == len(p) || p[j] < utf8.RuneSelf {
					break
				}
				r, size := utf8.DecodeRune(p[j:])
				if r <= c1Max || (r == utf8.RuneError && size == 1) {
					break
				}
				j += size
			}
			f.addRun(i, j)
			i = j
			if i == len(p) {
				break
			}
			b := p[i]
			if b < utf8.RuneSelf {
				// ESC starts a sequence; every other C0 control and DEL is dropped.
				if b == esc {
					f.enter(stEsc, 1)
				}
				i++
				continue
			}
			r, size := utf8.DecodeRune(p[i:])
			if r == utf8.RuneError && size == 1 {
				if !final && !utf8.FullRune(p[i:]) {
					return dst, i
				}
				f.addText(string(utf8.RuneError))
				i++
				continue
			}
			f.c1(r, size) // the scan above stops only at C1 or invalid bytes
			i += size
			continue
		}

		if f.st == stCSI {
			// Parameters and intermediates are most of a CSI sequence, and
			// need no decision beyond storing them.
			j := i
			for j < len(p) && p[j] >= 0x20 && p[j] < 0x40 {
				j++
			}
			if j > i {
				if !f.over {
					// Store no more than it takes to overflow.
					take := min(j-i, f.maxPending+1-len(f.pay))
					f.pay = append(f.pay, p[i:i+take]...)
				}
				f.count(j - i)
				if i = j; i == len(p) {
					break
				}
			}
		}

		r, size := rune(p[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRune(p[i:])
			if r == utf8.RuneError && size == 1 && !final && !utf8.FullRune(p[i:]) {
				return dst, i
			}
		}
		var ok bool
		dst, ok = f.escape(dst, r, p[i:i+size])
		if ok {
			i += size
		}
	}
	return dst, i
}

// c1 handles a C1 control decoded in ground state. In a UTF-8 stream the
// 8-bit introducers arrive as two-byte runes; the ones that start a sequence
// behave exactly like their ESC forms, the rest are dropped.
func (f *Filter) c1(r rune, size int) {
	switch r {
	case c1CSI:
		f.enter(stCSI, size)
	case c1OSC, c1DCS, c1SOS, c1PM, c1APC:
		f.enter(stString, size)
	}
}

// escape advances the sequence in progress by one rune (raw is its bytes).
// It reports false when the rune ended the sequence without being part of
// it, so the caller must process it again in the new state.
func (f *Filter) escape(dst []Segment, r rune, raw []byte) ([]Segment, bool) {
	switch f.st {
	case stString:
		// No string is acted on, so its payload is not kept: everything
		// but its terminator and the controls that cancel it is dropped.
		switch r {
		case bel, c1ST, can, sub:
			f.reset()
		case esc:
			f.st = stStringEsc
		}
		return dst, true

	case stStringEsc:
		if r == '\\' {
			f.reset() // ST
			return dst, true
		}
		// An ESC that is not part of ST ends the string unterminated, and
		// starts a new sequence. This is what keeps a stray "ESC ]" from
		// swallowing the sequences that follow it, and the text after them:
		// the next sequence's own ESC ends it.
		f.enter(stEsc, 1)
		return dst, false
	}

	// stEsc, stEscInter, stCSI: controls act the same in all three.
	switch {
	case r == esc:
		f.enter(stEsc, 1)
		return dst, true
	case r == can || r == sub:
		f.reset()
		return dst, true
	case r == '\n' || r == '\r' || r == '\b' || r == '\t':
		// A terminal executes C0 controls met inside a sequence and carries on
		// with the sequence; doing the same keeps line structure intact.
		f.addText(string(raw))
		return dst, true
	case r < 0x20 || r == del:
		return dst, true
	case r >= utf8.RuneSelf:
		// Not part of any sequence: abandon it and let ground state show
		// the rune rather than eat text until some final byte turns up.
		f.reset()
		return dst, false
	}

	b := byte(r)
	switch f.st {
	case stEsc:
		switch {
		case b == '[':
			f.st = stCSI
		case b == ']' || b == 'P' || b == 'X' || b == '^' || b == '_':
			f.st = stString
		case b < 0x30:
			f.st = stEscInter
		default:
			f.reset() // a complete two-character escape
			return dst, true
		}
	case stEscInter:
		if b >= 0x30 {
			f.reset()
			return dst, true
		}
	case stCSI:
		if b >= 0x40 {
			return f.endCSI(dst, b), true
		}
		if !f.over {
			f.pay = append(f.pay, b)
		}
	}
	f.count(1)
	return dst, true
}

// count charges n more bytes to the sequence in progress and switches to
// discard mode once it outgrows the carry bound. The stored parameters are
// never longer than the bytes counted, so they stay within it too.
func (f *Filter) count(n int) {
	f.n += n
	if f.n > f.maxPending && !f.over {
		f.over = true
		f.pay = f.pay[:0]
	}
}

func (f *Filter) endCSI(dst []Segment, final byte) []Segment {
	if !f.over {
		switch final {
		case 'K':
			if mode, ok := csiParam(f.pay); ok && mode <= 2 && !(mode == 0 && f.atEOL()) {
				dst = f.emitText(dst)
				dst = append(dst, Segment{Kind: EraseLine, Erase: mode})
			}
		case 'G':
			// CHA to the first column is exactly a carriage return; some
			// progress reporters use it instead of '\r'.
			if col, ok := csiParam(f.pay); ok && col <= 1 {
				f.addText("\r")
			}
		}
	}
	f.reset()
	return dst
}

// csiParam parses the first parameter of a CSI sequence with no private
// marker and no intermediates. An empty parameter is 0.
func csiParam(p []byte) (int, bool) {
	n := 0
	for _, b := range p {
		switch {
		case b >= '0' && b <= '9':
			if n < 1<<20 {
				n = n*10 + int(b-'0')
			}
		case b == ';':
			return n, true
		default:
			return 0, false
		}
	}
	return n, true
}

func (f *Filter) enter(s state, n int) {
	f.st, f.n, f.over = s, n, false
	f.pay = f.pay[:0]
}

func (f *Filter) reset() { f.enter(stGround, 0) }

// addRun adds in[i:j] to the pending text.
func (f *Filter) addRun(i, j int) {
	if i == j {
		return
	}
	if f.to == i && f.from < f.to {
		f.to = j
		return
	}
	f.spill()
	f.from, f.to = i, j
}

// addText adds s, which is not a range of the input, to the pending text.
func (f *Filter) addText(s string) {
	f.spill()
	f.text = append(f.text, s...)
}

// spill moves the pending input range into text.
func (f *Filter) spill() {
	if f.from < f.to {
		f.text = append(f.text, f.in[f.from:f.to]...)
	}
	f.from, f.to = 0, 0
}

// atEOL reports whether nothing is at or after the cursor once the pending
// text is rendered.
func (f *Filter) atEOL() bool {
	run := f.in[f.from:f.to]
	total := len(f.text) + len(run)
	fresh := total - f.scanned // pending is text ++ run; scan its new tail
	f.scanned = total
	if n := min(fresh, len(run)); n > 0 {
		if found, eol := cursorAtEOL(run[len(run)-n:]); found {
			f.eol = eol
			return eol
		}
		fresh -= n
	}
	if fresh > 0 {
		if found, eol := cursorAtEOL(f.text[len(f.text)-fresh:]); found {
			f.eol = eol
		}
	}
	return f.eol
}

// cursorAtEOL finds the last control in s that decides whether the cursor
// is at the end of the line: '\n' says yes, '\r' and '\b' say no.
func cursorAtEOL(s []byte) (found, eol bool) {
	for i := len(s) - 1; i >= 0; i-- {
		switch s[i] {
		case '\n':
			return true, true
		case '\r', '\b':
			return true, false
		}
	}
	return false, false
}

// emitText appends the pending text as one segment.
func (f *Filter) emitText(dst []Segment) []Segment {
	f.atEOL()
	f.scanned = 0
	var s string
	if len(f.text) == 0 {
		if f.from == f.to {
			return dst
		}
		s = string(f.in[f.from:f.to])
		f.from, f.to = 0, 0
	} else {
		f.spill()
		s = string(f.text)
		if cap(f.text) > maxIdleBuf {
			f.text = nil // do not pin a huge chunk's worth of memory between Feeds
		} else {
			f.text = f.text[:0]
		}
	}
	return append(dst, Segment{Kind: Text, Text: s})
}

// maxIdleBuf is the largest scratch buffer kept for reuse between calls.
const maxIdleBuf = 1 << 20
