package screen

import (
	"bytes"
	"unicode/utf8"
)

// Pending holds rendered lines (each ending in '\n') that nobody has
// pulled yet: a send's output between two Output calls, or output between
// sends. A bounded one keeps the newest limit bytes, cut at a line boundary
// where it can be, and records that it dropped something; to keep appends
// amortised O(1) it trims only once it has grown to twice the limit, and
// readers see the trimmed view. An unbounded one (for a caller that drains
// every line) keeps everything: the backend holds the terminal back
// instead. The zero value is unusable; make one with NewPending.
type Pending struct {
	data      []byte
	limit     int
	unbounded bool
	dropped   bool
}

// NewPending returns an empty buffer keeping the newest limit bytes, or
// everything when unbounded.
func NewPending(limit int, unbounded bool) Pending {
	return Pending{limit: limit, unbounded: unbounded}
}

// Append adds complete lines.
func (b *Pending) Append(lines []byte) {
	b.data = append(b.data, lines...)
	if !b.unbounded && len(b.data) > 2*b.limit {
		b.trim()
	}
}

// Len is how many bytes are pending, before any trim still due: what a
// backend compares with its bound to hold the terminal back.
func (b *Pending) Len() int { return len(b.data) }

// Bytes returns the pending lines, trimmed to the limit. The slice is the
// buffer's own until the next change.
func (b *Pending) Bytes() []byte {
	b.trim()
	return b.data
}

// Dropped reports that lines were discarded before anyone pulled them.
func (b *Pending) Dropped() bool { return b.dropped }

// TakeDropped reports Dropped and clears it.
func (b *Pending) TakeDropped() bool {
	d := b.dropped
	b.dropped = false
	return d
}

// Take returns the pending lines and empties the buffer.
func (b *Pending) Take() string {
	b.trim()
	s := string(b.data)
	b.reset()
	return s
}

// MoveTo hands the pending lines, and whether any were dropped, to dst.
func (b *Pending) MoveTo(dst *Pending) {
	b.trim()
	dst.Append(b.data)
	dst.dropped = dst.dropped || b.dropped
	b.reset()
	b.dropped = false
}

// trim drops the oldest lines until at most limit bytes remain. A single
// line longer than the limit keeps its newest bytes, from a rune start.
func (b *Pending) trim() {
	excess := len(b.data) - b.limit
	if b.unbounded || excess <= 0 {
		return
	}
	cut := excess
	if i := bytes.IndexByte(b.data[excess-1:], '\n'); i >= 0 && excess+i < len(b.data) {
		cut = excess + i // just past the '\n' at or after excess-1
	} else {
		for cut < len(b.data) && !utf8.RuneStart(b.data[cut]) {
			cut++
		}
	}
	b.data = b.data[:copy(b.data, b.data[cut:])]
	b.dropped = true
}

// reset empties the buffer, releasing a large backing array.
func (b *Pending) reset() {
	if cap(b.data) > 2*b.limit+64<<10 {
		b.data = nil
	} else {
		b.data = b.data[:0]
	}
}

// Tail returns the newest limit bytes of s, cut at a rune start.
func Tail(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	i := len(s) - limit
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// Viewport joins output a caller has not pulled yet and the line still
// being written, cut to the newest limit bytes: a send's settled snapshot.
// When the output ends inside a line (a line longer than Lines.MaxLineBytes
// is handed out in pieces), a newline goes between the two, so the text
// after the viewport's last newline is exactly the line still being
// written, the part Output hands out later. A caller that has pulled
// everything else takes that part and nothing twice.
func Viewport(unpulled, partial string, limit int) string {
	if unpulled != "" && unpulled[len(unpulled)-1] != '\n' {
		return Tail(unpulled+"\n"+partial, limit)
	}
	return Tail(unpulled+partial, limit)
}
