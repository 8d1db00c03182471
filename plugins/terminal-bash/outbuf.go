package terminalbash

import (
	"bytes"
	"unicode/utf8"
)

// outBuf holds committed lines (each ending in '\n') that a caller has not
// pulled yet. Unless it is unbounded (a streaming send, where the read loop
// holds the terminal back instead), it keeps only the newest limit bytes,
// cut at a line boundary. To keep appends amortised O(1) it lets the
// buffer grow to twice the limit before it moves anything; readers see the
// trimmed view.
type outBuf struct {
	data      []byte
	limit     int
	unbounded bool
	// dropped: lines were discarded before anyone pulled them.
	dropped bool
}

func (b *outBuf) append(lines []byte) {
	b.data = append(b.data, lines...)
	if !b.unbounded && len(b.data) > 2*b.limit {
		b.trim()
	}
}

// trim drops the oldest lines until at most limit bytes remain. A single
// line longer than the limit keeps its newest bytes.
func (b *outBuf) trim() {
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
	n := copy(b.data, b.data[cut:])
	b.data = b.data[:n]
	b.dropped = true
}

// take returns the pending lines and empties the buffer.
func (b *outBuf) take() string {
	b.trim()
	s := string(b.data)
	b.reset()
	return s
}

// reset empties the buffer, releasing a large backing array.
func (b *outBuf) reset() {
	if cap(b.data) > 2*b.limit+64<<10 {
		b.data = nil
	} else {
		b.data = b.data[:0]
	}
}

// moveTo hands the pending lines (and their dropped flag) to dst.
func (b *outBuf) moveTo(dst *outBuf) {
	b.trim()
	dst.data = append(dst.data, b.data...)
	dst.dropped = dst.dropped || b.dropped
	b.reset()
	b.dropped = false
}

// tailString returns the newest limit bytes of s, cut at a rune boundary.
func tailString(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	i := len(s) - limit
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}
