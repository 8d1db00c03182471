package backendkit

import (
	"github.com/dshdev/dsh/plugins/terminal/screen"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// Screen is what a session's terminal has shown, as every engine keeps it:
// the raw output, the renderer the read loop feeds, the scrollback, and the
// lines no send has claimed yet. The raw output is written before it is
// rendered, so the renderer is one reader of the byte stream among others,
// in the same order. A Screen is guarded by its session's lock.
type Screen struct {
	Raw       *Raw
	Render    *screen.Renderer
	Scroll    *screen.Scrollback
	Unclaimed screen.Pending
	// stale: the scrollback's partial line lags behind the renderer. It is
	// brought up to date when it is read, since that costs an allocation.
	stale bool
}

// NewScreen returns a Screen whose pages, viewports and unclaimed lines
// hold at most maxRead bytes, and whose scrollback keeps scrollLines lines
// and scrollBytes bytes.
func NewScreen(maxRead, scrollLines, scrollBytes int) *Screen {
	return &Screen{
		Raw:       NewRaw(DefaultRawWindow),
		Render:    screen.NewRenderer(maxRead),
		Scroll:    screen.NewScrollback(scrollLines, scrollBytes),
		Unclaimed: screen.NewPending(maxRead, false),
	}
}

// Write takes bytes the terminal wrote: it keeps them as raw output and
// renders them, and returns the lines the renderer committed, for Keep.
func (sc *Screen) Write(p []byte) []byte {
	sc.Raw.Write(p)
	sc.stale = true
	return sc.Render.Write(p)
}

// Flush ends what a command printed (an escape or UTF-8 sequence it left
// unfinished cannot swallow what comes next) and returns the lines that
// commits, for Keep.
func (sc *Screen) Flush() []byte {
	sc.stale = true
	return sc.Render.Flush()
}

// Keep puts committed lines in the scrollback and hands them to the live
// send, or, between sends, to the unclaimed lines the next send starts
// with.
func (sc *Screen) Keep(lines []byte, live *Send) {
	if len(lines) == 0 {
		return
	}
	sc.Scroll.Append(lines)
	if live != nil {
		live.Deliver(lines)
	} else {
		sc.Unclaimed.Append(lines)
	}
}

// Break ends the line the terminal is writing, if any: it goes to the
// scrollback as a line of its own, and is returned with its newline.
func (sc *Screen) Break() string {
	line := sc.Render.Break(nil)
	if len(line) == 0 {
		return ""
	}
	sc.Scroll.Append(line)
	sc.stale = true
	return string(line)
}

// Background takes what the terminal showed since the last send claimed
// its lines (background jobs' output, which nobody has seen), the line
// being written included, and whether older lines of it were dropped.
func (sc *Screen) Background() (text string, truncated bool) {
	text = sc.Unclaimed.Take() + sc.Break()
	return text, sc.Unclaimed.TakeDropped()
}

// Claim gives sn the lines no send has claimed yet; Unclaim gives them
// back, from a send that did not start.
func (sc *Screen) Claim(sn *Send)   { sc.Unclaimed.MoveTo(&sn.Out) }
func (sc *Screen) Unclaim(sn *Send) { sn.Out.MoveTo(&sc.Unclaimed) }

// Read returns a page of the scrollback, its partial line brought up to
// date.
func (sc *Screen) Read(req termapi.ReadRequest, limit int) (termapi.ReadResult, error) {
	if sc.stale {
		sc.Scroll.SetPartial(sc.Render.Partial())
		sc.stale = false
	}
	return ReadPage(sc.Scroll, req, limit)
}
