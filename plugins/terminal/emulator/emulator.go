package emulator

import (
	"io"
	"strings"
	"sync"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/vt"

	"github.com/dshdev/dsh/plugins/terminal/screen"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// maxLineBytes bounds one line of main-screen output, as the bash tool's
// renderer does: a longer line is handed out in pieces.
const maxLineBytes = 64 << 10

// Screen is what a terminal shows: an emulator for the screen and a line
// renderer for the main screen's output. See the package doc.
type Screen struct {
	vt     *vt.Emulator
	size   termapi.Size
	render *screen.Renderer
	// lines holds the main screen's committed lines not taken yet, the
	// newest bytes up to its bound.
	lines      screen.Pending
	cursorKeys bool // DECCKM: the program asked for application cursor keys
	// prev are the rows of the previous snapshot, and prevAlt the screen
	// they were on, for the rows that changed since.
	prev    []string
	prevAlt bool
	// private is where the scanner is in a control sequence, across
	// writes.
	private scanState
	// drawn: since the previous Lines, the main screen was drawn on by
	// cursor address or cleared (top, watch, apt's progress line): the
	// screen, not the lines, shows what the program means.
	drawn   bool
	drained chan struct{}
	// replies are the emulator's answers to the program's queries, not
	// yet taken (Replies); guarded by repliesMu, since the goroutine that
	// drains the emulator adds to them.
	repliesMu sync.Mutex
	replies   []byte
}

// maxReplies bounds the answers kept for the program: a program that
// floods queries without reading the answers loses the newest.
const maxReplies = 4 << 10

// New returns a screen of size (rows and cols at least 1) whose main-screen
// lines keep the newest maxPending bytes until taken.
func New(size termapi.Size, maxPending int) *Screen {
	size = clampSize(size)
	s := &Screen{
		vt:      vt.NewEmulator(size.Cols, size.Rows),
		size:    size,
		render:  screen.NewRenderer(maxLineBytes),
		lines:   screen.NewPending(maxPending, false),
		drained: make(chan struct{}),
	}
	s.vt.SetCallbacks(vt.Callbacks{
		EnableMode: func(m ansi.Mode) {
			if m == ansi.ModeCursorKeys {
				s.cursorKeys = true
			}
		},
		DisableMode: func(m ansi.Mode) {
			if m == ansi.ModeCursorKeys {
				s.cursorKeys = false
			}
		},
	})
	// The emulator writes its answers to the program's queries into a
	// pipe, which must be read or the emulator blocks on them.
	go func() {
		defer close(s.drained)
		buf := make([]byte, 256)
		for {
			n, err := s.vt.Read(buf)
			s.repliesMu.Lock()
			if len(s.replies)+n <= maxReplies {
				s.replies = append(s.replies, buf[:n]...)
			}
			s.repliesMu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return s
}

func clampSize(size termapi.Size) termapi.Size {
	size.Rows = min(max(size.Rows, 1), termapi.MaxSize)
	size.Cols = min(max(size.Cols, 1), termapi.MaxSize)
	return size
}

// Close ends the goroutine that drains the emulator's answers. It closes
// the answers' pipe itself: the emulator's own Close marks it closed
// without a lock that its Read, on the draining goroutine, would share.
func (s *Screen) Close() {
	if c, ok := s.vt.InputPipe().(io.Closer); ok {
		_ = c.Close()
	}
	<-s.drained
}

// Write feeds raw terminal output, in order.
func (s *Screen) Write(p []byte) {
	for len(p) > 0 {
		n, drawn := s.private.next(p)
		piece := p[:n]
		p = p[n:]
		onMain := !s.vt.IsAltScreen()
		_, _ = s.vt.Write(piece)
		if onMain {
			s.drawn = s.drawn || drawn
			s.lines.Append(s.render.Write(piece))
		}
	}
}

// Replies returns the answers the terminal owes the program for its
// queries (the cursor position, device attributes, colours), as a real
// terminal would type them, and forgets them.
func (s *Screen) Replies() []byte {
	s.repliesMu.Lock()
	defer s.repliesMu.Unlock()
	r := s.replies
	s.replies = nil
	return r
}

// Resize changes the screen's size; every row counts as changed at the
// next snapshot.
func (s *Screen) Resize(size termapi.Size) {
	size = clampSize(size)
	if size == s.size {
		return
	}
	s.size = size
	s.vt.Resize(size.Cols, size.Rows)
	s.prev = nil
}

// Size is the screen's size.
func (s *Screen) Size() termapi.Size { return s.size }

// AltScreen reports whether a program has the alternate screen.
func (s *Screen) AltScreen() bool { return s.vt.IsAltScreen() }

// CursorKeys reports whether the program asked for application cursor
// keys (DECCKM): the arrows, Home and End are then sent as SS3 sequences.
func (s *Screen) CursorKeys() bool { return s.cursorKeys }

// Snapshot is a screen as text.
type Snapshot struct {
	// Rows are the screen's rows, top first, each with its trailing blanks
	// trimmed; blank rows at the bottom are left out.
	Rows []string
	// Row and Col are the cursor's position, from 1.
	Row, Col int
	// CursorHidden: the program hid the cursor.
	CursorHidden bool
	// Changed are the rows (from 1) that differ from the previous
	// snapshot, or all of them when the screen switched or was resized.
	Changed []int
	// Alt: the alternate screen.
	Alt  bool
	Size termapi.Size
}

// Snapshot returns the screen now and remembers it, so that the next
// snapshot says which rows changed since this one.
func (s *Screen) Snapshot() Snapshot {
	alt := s.vt.IsAltScreen()
	rows := s.rows()
	pos := s.vt.CursorPosition()
	snap := Snapshot{Row: pos.Y + 1, Col: pos.X + 1, CursorHidden: s.vt.CursorHidden(), Alt: alt, Size: s.size}
	fresh := s.prev == nil || alt != s.prevAlt
	for i, r := range rows {
		if fresh || i >= len(s.prev) || s.prev[i] != r {
			snap.Changed = append(snap.Changed, i+1)
		}
	}
	s.prev, s.prevAlt = rows, alt
	last := len(rows)
	for last > 0 && rows[last-1] == "" {
		last--
	}
	snap.Rows = rows[:last:last]
	return snap
}

// Text is the screen's rows joined by newlines, trailing blanks trimmed,
// without remembering anything (for matching).
func (s *Screen) Text() string { return strings.TrimRight(strings.Join(s.rows(), "\n"), "\n") }

// rows renders every row of the current screen.
func (s *Screen) rows() []string {
	rows := make([]string, s.size.Rows)
	var b strings.Builder
	for y := range s.size.Rows {
		b.Reset()
		blanks := 0
		for x := 0; x < s.size.Cols; {
			c := s.vt.CellAt(x, y)
			w := 1
			text := " "
			if c != nil {
				if c.Width > 1 {
					w = c.Width
				}
				if c.Content != "" {
					text = c.Content
				}
			}
			if text == " " {
				blanks++
			} else {
				for ; blanks > 0; blanks-- {
					b.WriteByte(' ')
				}
				b.WriteString(text)
			}
			x += w
		}
		rows[y] = b.String()
	}
	return rows
}

// Lines returns the main screen's lines committed since the previous call
// (each ending in a newline), the line still being written, and whether
// older lines were dropped to the bound meanwhile.
func (s *Screen) Lines() (committed, partial string, dropped bool) {
	s.drawn = false
	dropped = s.lines.TakeDropped()
	return s.lines.Take(), s.render.Partial(), dropped
}

// Drawn reports whether, since the previous Lines, a program drew on the
// main screen by cursor address or cleared it: a full-screen program that
// does not use the alternate screen (top), for which Snapshot shows more
// than Lines.
func (s *Screen) Drawn() bool { return s.drawn }

// PeekLines is what Lines would return now, committed lines and the
// partial line together, without taking anything (for matching).
func (s *Screen) PeekLines() string {
	return string(s.lines.Bytes()) + s.render.Partial()
}

// scanState follows control sequences (ESC [ ... final) across writes,
// so that the stream can be cut right after each DEC private mode sequence
// (ESC [ ? ... h or l, where the screens switch), and cursor addressing
// (CUP, HVP) and erasing the display (ED) are noticed.
type scanState uint8

const (
	scanGround  scanState = iota
	scanEsc               // after ESC
	scanCSI               // in ESC [ ..., no private marker
	scanPrivate           // in ESC [ ? ...
)

// next returns how many bytes of p to feed before the screens may switch:
// up to and including the final byte of the first DEC private mode
// sequence that ends in p, or all of p; and whether those bytes address
// the cursor or erase the display.
func (st *scanState) next(p []byte) (n int, drawn bool) {
	for i, b := range p {
		switch {
		case b == 0x1b:
			*st = scanEsc
		case *st == scanEsc && b == '[':
			*st = scanCSI
		case *st == scanCSI && b == '?':
			*st = scanPrivate
		case (*st == scanCSI || *st == scanPrivate) && b >= 0x20 && b < 0x40:
			// parameters and intermediates
		case *st == scanPrivate && b >= 0x40 && b <= 0x7e:
			*st = scanGround
			return i + 1, drawn
		case *st == scanCSI && b >= 0x40 && b <= 0x7e:
			drawn = drawn || b == 'H' || b == 'f' || b == 'J'
			*st = scanGround
		default:
			*st = scanGround
		}
	}
	return len(p), drawn
}
