package screen

// Renderer runs the first two stages together, as a terminal reader does:
// it filters each chunk of output, renders the segments onto the line, and
// returns the lines the chunk committed. Its scratch is kept from chunk to
// chunk, so a busy reader does not allocate per chunk.
type Renderer struct {
	filter    *Filter
	lines     Lines
	segs      []Segment
	committed []byte
}

// NewRenderer returns a Renderer whose lines are handed out in pieces past
// maxLineBytes (see Lines.MaxLineBytes).
func NewRenderer(maxLineBytes int) *Renderer {
	return &Renderer{filter: NewFilter(0), lines: Lines{MaxLineBytes: maxLineBytes}}
}

// maxKeptScratch bounds the committed-lines buffer kept between chunks: one
// huge chunk should not pin its buffer for the session's life.
const maxKeptScratch = 1 << 20

// Write renders chunk p and returns the lines it committed, each ending in
// '\n'. The result is valid until the next call of Write or Flush.
func (r *Renderer) Write(p []byte) []byte {
	r.segs = r.filter.Feed(r.segs[:0], p)
	return r.render()
}

// Flush ends the output so far: an escape or UTF-8 sequence left unfinished
// is ended here, so it cannot swallow what comes next. It returns the lines
// that committed, like Write.
func (r *Renderer) Flush() []byte {
	r.segs = r.filter.Flush(r.segs[:0])
	return r.render()
}

func (r *Renderer) render() []byte {
	out := r.committed[:0]
	for i := range r.segs {
		out = r.lines.Write(out, r.segs[i])
		r.segs[i].Text = "" // let the chunk's text go
	}
	r.committed = out
	if cap(out) > maxKeptScratch {
		r.committed = nil
	}
	return out
}

// Partial is the line being written (see Lines.Partial).
func (r *Renderer) Partial() string { return r.lines.Partial() }

// Break commits the line being written, if any, and appends it with its
// newline to dst (see Lines.Break).
func (r *Renderer) Break(dst []byte) []byte { return r.lines.Break(dst) }
