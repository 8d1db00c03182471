package screen

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strings"
	"unicode/utf8"
)

// Errors returned by Scrollback.Read, wrapped with the offending value.
var (
	ErrBadOffset = errors.New("read offset must be a non-negative integer")
	ErrBadCount  = errors.New("read count must be a positive integer")
)

// chunkBytes is the size of one storage chunk. Lines are packed into
// chunks, so an append is a copy into the newest chunk and dropping old
// lines is an index bump in the oldest; whole chunks are recycled.
const chunkBytes = 64 << 10

// firstChunkBytes is the size of a scrollback's first chunk; later ones
// double up to chunkBytes.
const firstChunkBytes = 2 << 10

// chunk holds consecutive committed lines, each stored with its '\n'. A line
// never spans chunks; one longer than chunkBytes gets a chunk of its own.
type chunk struct {
	data  []byte
	ends  []int32 // ends[i] is the offset just past line i's '\n'
	first int     // lines before first have been dropped
}

func newChunk(size int) *chunk {
	// Room for the line ends of 16-byte lines; shorter ones grow the slice.
	return &chunk{data: make([]byte, 0, size), ends: make([]int32, 0, size/16)}
}

func (c *chunk) end(i int) int { return int(c.ends[i]) }

func (c *chunk) lineStart(i int) int {
	if i == 0 {
		return 0
	}
	return c.end(i - 1)
}

func (c *chunk) live() int { return len(c.ends) - c.first }

// Scrollback is the retained history: the committed lines plus the current
// partial line, bounded by a line count and a byte count.
type Scrollback struct {
	maxLines, maxBytes int

	chunks []*chunk // oldest first
	spare  *chunk   // a recycled standard chunk

	lines int // committed lines retained
	bytes int // their bytes, '\n' included

	partial    string
	partialCut bool // partial lost its head to maxBytes

	dropped uint64
}

// Page is one Scrollback.Read result.
type Page struct {
	// Text is the page's lines joined with '\n', without a trailing one.
	Text string
	// TotalLines is the number of lines retained when the page was read.
	TotalLines int
	// LineBegin and LineEnd locate the page as offsets from the newest
	// line: LineBegin is the requested offset, LineEnd is LineBegin plus
	// the number of lines in Text (a first line cut by the byte limit
	// counts). The next older page starts at LineEnd.
	LineBegin, LineEnd int
	// Truncated reports that Text is not the whole story: the byte limit
	// cut it, or the page reaches back to the oldest retained line and
	// older output has been lost.
	Truncated bool
}

// NewScrollback returns a Scrollback that retains at most maxLines committed
// lines and maxBytes bytes in total. Values below 1 are raised to 1, and
// maxBytes is capped at MaxScrollbackBytes.
func NewScrollback(maxLines, maxBytes int) *Scrollback {
	return &Scrollback{
		maxLines: max(maxLines, 1),
		maxBytes: min(max(maxBytes, 1), MaxScrollbackBytes),
	}
}

// MaxScrollbackBytes is the largest byte bound a Scrollback accepts; line
// offsets are stored in 32 bits to halve the index.
const MaxScrollbackBytes = math.MaxInt32

// Append adds committed lines, each ending in '\n' (a final line without
// one is taken as complete). It clears the partial line: the lines being
// committed are what the partial line was showing, and keeping it until the
// next SetPartial would charge those bytes twice against maxBytes. Call
// SetPartial after Append, not before.
//
// A line longer than maxBytes keeps only its newest bytes; it counts as
// dropped, as do the older lines it pushes out.
func (s *Scrollback) Append(committed []byte) {
	if len(committed) == 0 {
		return
	}
	s.partial, s.partialCut = "", false
	for len(committed) > 0 {
		// Copy as many whole lines as fit in the newest chunk at once.
		k := 0
		if n := len(s.chunks); n > 0 {
			c := s.chunks[n-1]
			room := min(cap(c.data)-len(c.data), len(committed))
			k = bytes.LastIndexByte(committed[:room], '\n') + 1
			if k > 0 {
				// Every line here is shorter than the chunk, which is no
				// larger than maxBytes: no cutting needed.
				start := len(c.data)
				c.data = append(c.data, committed[:k]...)
				s.lines += c.indexLines(start)
				s.bytes += k
				committed = committed[k:]
				continue
			}
		}
		// The next line does not fit (or lacks its '\n'): place it alone.
		line := committed
		if i := bytes.IndexByte(committed, '\n'); i >= 0 {
			line = committed[:i+1]
		}
		s.appendLine(line)
		committed = committed[len(line):]
	}
	s.trim()
}

// indexLines records the end of every line in data[from:] and returns how
// many there were. It finds '\n' eight bytes at a time.
func (c *chunk) indexLines(from int) int {
	d := c.data
	n := len(c.ends)
	i := from
	for ; i+8 <= len(d); i += 8 {
		m := zeroBytes(binary.LittleEndian.Uint64(d[i:]) ^ '\n'*ones)
		for m != 0 {
			c.ends = append(c.ends, int32(i+bits.TrailingZeros64(m)/8+1))
			m &= m - 1
		}
	}
	for ; i < len(d); i++ {
		if d[i] == '\n' {
			c.ends = append(c.ends, int32(i+1))
		}
	}
	return len(c.ends) - n
}

func (s *Scrollback) appendLine(line []byte) {
	content := line
	if line[len(line)-1] == '\n' {
		content = line[:len(line)-1]
	}
	size := len(content) + 1
	if size > s.maxBytes {
		content = keepTail(content, s.maxBytes-1)
		size = len(content) + 1
		s.dropped++
	}
	c := s.tail(size)
	c.data = append(c.data, content...)
	c.data = append(c.data, '\n')
	c.ends = append(c.ends, int32(len(c.data)))
	s.lines++
	s.bytes += size
}

// tail returns the newest chunk, or a fresh one if it lacks size bytes of
// room.
func (s *Scrollback) tail(size int) *chunk {
	if n := len(s.chunks); n > 0 {
		if c := s.chunks[n-1]; cap(c.data)-len(c.data) >= size {
			return c
		}
	}
	std := min(chunkBytes, s.maxBytes)
	want := std
	if n := len(s.chunks); n == 0 || cap(s.chunks[n-1].data) < std {
		// A terminal that has printed little keeps little: the first
		// chunks start at firstChunkBytes and double up to the standard
		// size, so a thousand quiet sessions do not hold 64 KiB each.
		grown := firstChunkBytes
		if n > 0 {
			grown = 2 * cap(s.chunks[n-1].data)
		}
		want = min(std, grown)
	}
	var c *chunk
	if size <= want && want == std && s.spare != nil {
		c, s.spare = s.spare, nil
	} else {
		c = newChunk(max(want, size))
	}
	s.chunks = append(s.chunks, c)
	return c
}

// SetPartial sets the current partial line, shown as the newest line when
// it is not empty. A partial line longer than maxBytes keeps its newest
// bytes.
func (s *Scrollback) SetPartial(line string) {
	s.partialCut = len(line) > s.maxBytes
	if s.partialCut {
		line = strings.Clone(keepTail(line, s.maxBytes))
	}
	s.partial = line
	s.trim()
}

// trim drops the oldest lines until both bounds hold. Line-count excess is
// removed a chunk or an index range at a time, byte excess with a binary
// search over line ends, so the cost does not grow with the lines dropped.
func (s *Scrollback) trim() {
	for s.lines > 0 {
		overLines := s.lines - s.maxLines
		overBytes := s.bytes + len(s.partial) - s.maxBytes
		if overLines <= 0 && overBytes <= 0 {
			return
		}
		c := s.chunks[0]
		start := c.lineStart(c.first)
		live := c.live()
		if overLines >= live || overBytes >= len(c.data)-start {
			s.lines -= live
			s.bytes -= len(c.data) - start
			s.dropped += uint64(live)
			s.chunks[0] = nil
			s.chunks = s.chunks[1:]
			if cap(c.data) == min(chunkBytes, s.maxBytes) {
				c.data, c.ends, c.first = c.data[:0], c.ends[:0], 0
				s.spare = c
			}
			continue
		}
		k := max(overLines, 0)
		if overBytes > 0 {
			kb := 1 + sort.Search(live, func(i int) bool {
				return c.end(c.first+i)-start >= overBytes
			})
			k = max(k, kb)
		}
		s.bytes -= c.end(c.first+k-1) - start
		s.lines -= k
		s.dropped += uint64(k)
		c.first += k
	}
}

// Dropped returns how many committed lines have lost content so far, wholly
// or (for a line longer than maxBytes) in part. It never decreases, so a
// caller can tell whether anything was lost since an earlier reading.
func (s *Scrollback) Dropped() uint64 { return s.dropped }

// TotalLines returns the number of lines retained: the committed ones plus
// the partial line if it is not empty.
func (s *Scrollback) TotalLines() int {
	if s.partial != "" {
		return s.lines + 1
	}
	return s.lines
}

// Bytes returns the number of bytes retained, counting a '\n' for each
// committed line.
func (s *Scrollback) Bytes() int { return s.bytes + len(s.partial) }

// Read returns up to count lines, ending offset lines before the newest one,
// and keeps the newest maxBytes bytes of them (cut at a rune boundary; zero
// or less means no byte limit).
func (s *Scrollback) Read(offset, count, maxBytes int) (Page, error) {
	if offset < 0 {
		return Page{}, fmt.Errorf("%w (got %d)", ErrBadOffset, offset)
	}
	if count < 1 {
		return Page{}, fmt.Errorf("%w (got %d)", ErrBadCount, count)
	}
	total := s.TotalLines()
	lost := s.dropped > 0 || s.partialCut
	if offset >= total {
		return Page{TotalLines: total, LineBegin: offset, LineEnd: offset, Truncated: lost}, nil
	}
	end := total - offset
	start := 0
	if count < end {
		start = end - count
	}

	pieces, lastEmpty := s.pieces(start, end)
	size := 0
	for _, p := range pieces {
		size += len(p)
	}
	cut := 0
	if maxBytes > 0 && size > maxBytes {
		cut = size - maxBytes
		for cut < size && !utf8.RuneStart(byteAt(pieces, cut)) {
			cut++
		}
		// Start the page on a whole line rather than on the separator.
		if cut < size && byteAt(pieces, cut) == '\n' {
			cut++
		}
	}
	var b strings.Builder
	b.Grow(size - cut)
	skip := cut
	for _, p := range pieces {
		if skip >= len(p) {
			skip -= len(p)
			continue
		}
		b.Write(p[skip:])
		skip = 0
	}
	text := b.String()

	n := strings.Count(text, "\n") + 1
	if text == "" && !lastEmpty {
		n = 0
	}
	return Page{
		Text:       text,
		TotalLines: total,
		LineBegin:  offset,
		LineEnd:    offset + n,
		Truncated:  cut > 0 || (start == 0 && lost),
	}, nil
}

// pieces returns lines [start, end) (0 is the oldest retained line) as byte
// slices whose concatenation is the lines joined by '\n', and whether the
// last of them is empty.
func (s *Scrollback) pieces(start, end int) (pieces [][]byte, lastEmpty bool) {
	withPartial := end > s.lines
	if withPartial {
		end = s.lines
	}
	i := start
	for _, c := range s.chunks {
		if i >= end {
			break
		}
		live := c.live()
		if i >= live {
			i -= live
			end -= live
			continue
		}
		j := min(end, live)
		pieces = append(pieces, c.data[c.lineStart(c.first+i):c.end(c.first+j-1)])
		end -= live
		i = 0
	}
	if withPartial {
		return append(pieces, []byte(s.partial)), false
	}
	// The range ends on a committed line: drop its '\n'.
	last := pieces[len(pieces)-1]
	last = last[:len(last)-1]
	pieces[len(pieces)-1] = last
	return pieces, len(last) == 0 || last[len(last)-1] == '\n'
}

func byteAt(pieces [][]byte, i int) byte {
	for _, p := range pieces {
		if i < len(p) {
			return p[i]
		}
		i -= len(p)
	}
	return 0
}

// keepTail returns the newest bytes of b, at most n, starting at a rune
// boundary. A rune wider than n yields nothing.
func keepTail[T string | []byte](b T, n int) T {
	if len(b) <= n {
		return b
	}
	i := len(b) - max(n, 0)
	for i < len(b) && !utf8.RuneStart(b[i]) {
		i++
	}
	return b[i:]
}

// Check reports whether the scrollback keeps its own rules: its counts of
// lines and bytes are those of the lines it holds, and they stay within
// its bounds. For runtime invariants; nil when all hold.
func (s *Scrollback) Check() error {
	lines, bytes := 0, 0
	for _, c := range s.chunks {
		if c.first > len(c.ends) {
			return fmt.Errorf("scrollback: a chunk dropped %d of its %d lines", c.first, len(c.ends))
		}
		lines += len(c.ends) - c.first
		if len(c.ends) > c.first {
			bytes += c.end(len(c.ends)-1) - c.lineStart(c.first)
		}
	}
	switch {
	case lines != s.lines || bytes != s.bytes:
		return fmt.Errorf("scrollback: counts %d lines and %d bytes, holds %d and %d", s.lines, s.bytes, lines, bytes)
	case s.lines > s.maxLines:
		return fmt.Errorf("scrollback: holds %d lines, bound %d", s.lines, s.maxLines)
	case s.Bytes() > s.maxBytes:
		return fmt.Errorf("scrollback: holds %d bytes, bound %d", s.Bytes(), s.maxBytes)
	}
	return nil
}
