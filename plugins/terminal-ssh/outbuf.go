package terminalssh

import (
	"bytes"
	"unicode/utf8"
)

// outBuf holds rendered lines (each ending in '\n') that nobody has pulled
// yet. A bounded one keeps the newest limit bytes, cut at a line boundary
// where it can be, and records that it dropped something; it trims only
// once it has grown to twice the limit, so appends stay cheap. An unbounded
// one (a streaming send) keeps everything: the read loop holds the terminal
// back instead.
type outBuf struct {
	data      []byte
	limit     int
	unbounded bool
	dropped   bool
}

func (b *outBuf) append(lines []byte) {
	b.data = append(b.data, lines...)
	if !b.unbounded && len(b.data) > 2*b.limit {
		b.trim()
	}
}

// trim drops the oldest bytes beyond the limit.
func (b *outBuf) trim() {
	excess := len(b.data) - b.limit
	if b.unbounded || excess <= 0 {
		return
	}
	cut := excess
	if i := bytes.IndexByte(b.data[excess-1:], '\n'); i >= 0 && excess+i < len(b.data) {
		cut = excess + i
	} else {
		for cut < len(b.data) && !utf8.RuneStart(b.data[cut]) {
			cut++
		}
	}
	b.data = b.data[:copy(b.data, b.data[cut:])]
	b.dropped = true
}

// take returns what is pending and empties the buffer.
func (b *outBuf) take() string {
	b.trim()
	s := string(b.data)
	b.reset()
	return s
}

func (b *outBuf) reset() {
	if cap(b.data) > 2*b.limit+64<<10 {
		b.data = nil
	} else {
		b.data = b.data[:0]
	}
}

// moveTo hands what is pending, and whether anything was dropped, to dst.
func (b *outBuf) moveTo(dst *outBuf) {
	b.trim()
	dst.append(b.data)
	dst.dropped = dst.dropped || b.dropped
	b.reset()
	b.dropped = false
}

// tailString returns the newest limit bytes of s, cut at a rune start.
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
