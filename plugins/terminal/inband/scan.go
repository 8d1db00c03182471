package inband

import "bytes"

// scanner splits the terminal's byte stream into output and markers,
// whatever the reads that carry it. Markers never reach the output. A
// string that starts like a marker but is not one (too long, or cut by
// another escape sequence) stays output; the renderer drops it as the OSC
// string it is. A marker is cut only by ESC, CAN, SUB or BEL, like any OSC
// string, so output that opens a string and never ends it cannot swallow
// the next real marker.
type scanner struct {
	held []byte // a possible marker at the end of the last feed
}

const (
	bel = 0x07
	esc = 0x1b
	can = 0x18
	sub = 0x1a
)

// feed scans p and passes the output to out and each marker's payload to
// mark, in stream order. Neither may keep the slice it gets. A possible
// marker at the end of p is held back until the next feed.
func (sc *scanner) feed(p []byte, out, mark func([]byte)) {
	data := p
	if len(sc.held) > 0 {
		sc.held = append(sc.held, p...)
		data = sc.held
	}
	from, at := 0, 0 // output not passed on yet starts at from; search at at
	for {
		k := bytes.IndexByte(data[at:], esc)
		if k < 0 {
			break
		}
		k += at
		rest := data[k:]
		n := min(len(rest), len(markerPrefix))
		if string(rest[:n]) != markerPrefix[:n] {
			at = k + 1
			continue
		}
		body := rest[n:]
		end := terminator(body[:min(len(body), maxMarker+1)])
		switch {
		case n < len(markerPrefix), end < 0 && len(body) <= maxMarker:
			// Cut by the end of the read: wait for the rest.
			if k > from {
				out(data[from:k])
			}
			sc.held = append(sc.held[:0], rest...)
			return
		case end < 0:
			at = k + 1 // too long for a marker
			continue
		case body[end] != bel:
			at = k + n + end // cut by another control: look again from it
			continue
		}
		if k > from {
			out(data[from:k])
		}
		mark(body[:end])
		from = k + n + end + 1
		at = from
	}
	if from < len(data) {
		out(data[from:])
	}
	sc.held = sc.held[:0]
}

// terminator returns the index of the first byte that ends an OSC string
// in p (BEL, or ESC, CAN, SUB, which cut it), or -1.
func terminator(p []byte) int {
	for i, c := range p {
		if c == bel || c == esc || c == can || c == sub {
			return i
		}
	}
	return -1
}

// flush passes on what is held back, at the end of the stream.
func (sc *scanner) flush(out func([]byte)) {
	if len(sc.held) > 0 {
		out(sc.held)
		sc.held = sc.held[:0]
	}
}
