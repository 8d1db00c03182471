// Package emulator turns a terminal's raw output into what a person at the
// terminal sees: a screen of cells with a cursor for a full-screen program,
// and lines of output for everything else. The interactive terminal tools
// (plugins/tool-terminal) read programs through it.
//
// # Two views of one stream
//
// Every byte goes to a real terminal emulator (a cell grid with a cursor,
// the main and the alternate screen, scroll regions, insert and delete of
// lines and characters, wide characters). While a program is on the
// alternate screen (vim, less, top, htop: what a terminal's smcup
// switches to), the screen is the output: Snapshot gives its rows as text,
// trailing blanks trimmed, the cursor, and which rows changed since the
// previous snapshot.
//
// On the main screen output is a stream of lines (a shell, a REPL, a build):
// the bytes also go, in the same order, to the line renderer the bash tool
// uses (package screen), so a carriage-return redraw, a progress bar, a
// colour or a title costs nothing: "10%\r20%\r100%\n" is the line "100%".
// Lines gives the lines committed since the previous call and the line
// still being written (a prompt). What a program draws on the alternate
// screen never reaches the lines: the stream is cut after each DEC private
// mode sequence (ESC [ ? ... h or l, where the screens switch), and a piece
// goes to the line renderer only when it began on the main screen.
//
// # The library
//
// The emulator is github.com/charmbracelet/x/vt: an actively maintained
// (Charm, 2026 releases), pure Go VT/xterm emulator with the alternate
// screen, scroll regions, DEC modes (application cursor keys among them,
// which the key names of the tools depend on), wide characters and
// grapheme clusters, tested against xterm's behaviour; it takes a byte
// stream and needs no terminal of its own. The other candidates were
// hinshun/vt10x and its forks, which have no tagged release and no
// alternate-screen callbacks, and tcell's simulation screen, which is a
// screen for a program to draw on, not an emulator of one.
//
// The emulator answers a program's queries (the cursor position, device
// attributes, colours) as xterm would; Replies hands the answers out, for
// the owner to type into the terminal when the program waits for them.
// vim, for one, asks for the cursor position and waits a moment for the
// answer when it exits.
//
// A Screen is not safe for concurrent use: its owner serialises Write,
// Resize, Snapshot and Lines.
package emulator
