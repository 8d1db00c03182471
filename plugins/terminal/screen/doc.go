// Package screen turns the raw bytes a shell writes to its PTY into the text
// a terminal would show, one line at a time, as a bounded history that can
// be paged from the newest line backwards.
//
// # Model
//
// Output passes through three stages, each usable alone:
//
//  1. Filter decodes UTF-8 (each invalid byte becomes U+FFFD, as in a Go
//     range loop) and parses escape sequences, both carried across chunk
//     boundaries. It emits Segments: Text with the printable output and the
//     cursor controls '\n', '\r', '\b', '\t'; EraseLine for EL (CSI K).
//     Every other sequence is dropped, as is every other control.
//  2. Lines renders Text and EraseLine segments onto a single row the way a
//     terminal does and returns each line when '\n' commits it.
//  3. Scrollback keeps the committed lines and the current partial line
//     within a line and a byte bound, and serves pages counted from the
//     newest line.
//
// Beside them, Pending holds the committed lines that a send's caller has
// not pulled yet, bounded to the newest bytes unless the caller drains
// every line, and Tail cuts a viewport to its newest bytes.
//
// A PTY reader feeds each chunk to Filter.Feed, hands every segment to
// Lines.Write, passes the committed lines to Scrollback.Append and then
// Lines.Partial to Scrollback.SetPartial. Filter.Flush at end of output
// drains what the Filter still holds. Renderer runs the first two stages
// together, with its scratch kept from chunk to chunk.
//
// Nothing here is safe for concurrent use; the PTY reader owns all three
// values and anyone else must go through its lock. There are no goroutines.
//
// # Carriage return overwrites
//
// The sanitizer this replaces turned a lone '\r' into a newline. That made
// every redraw of a progress bar its own line, so a download could push the
// whole useful history out of the scrollback and into the agent's context.
// Here '\r' only moves the cursor to column 0 and later text overwrites the
// line in place, so "10%\r20%\r30%\n" is stored as the single line "30%",
// "abc\rX\n" as "Xbc", and "downloading\r\x1b[Kdone\n" as "done": what a
// person at the terminal would see. A side effect is that a CRLF split
// between two chunks needs no special care, since '\r' before '\n' changes
// nothing. EL 1 blanks the cursor's own cell too, as ECMA-48 and real
// terminals do.
//
// Columns are counted in runes. There is no character width table and no
// wrapping at the PTY width, so a line that relies on wide characters, or
// on the terminal wrapping it before a '\r' returns to its start, can
// render differently from a real terminal. (Readline under TERM=dumb
// scrolls a long command line horizontally instead of wrapping it, which
// renders as it would on screen: "<" and the command's tail.) Cursor
// movement other than CR, BS and CHA to the first column is dropped, so a
// program that moves the cursor with CSI sequences (rare under TERM=dumb)
// renders as if it had not moved.
//
// Partial lines are bounded: a line that would grow past Lines.MaxLineBytes
// is handed out in pieces, without newlines between them, so it stays one
// line byte for byte while memory stays bounded. A consumer that keeps
// lines (Scrollback) stores each piece as a line; Viewport marks where
// handed-out output ends inside a line.
//
// # Escape sequences
//
// The parser follows the usual VT state machine rather than the looser
// scan of the original sanitizer, because terminal behaviour is what
// programs are written against:
//
//   - OSC (ESC ] or U+009D) and the other strings, DCS, SOS, PM and APC,
//     end at BEL or ST (ESC \ or U+009C). None of them does anything: they
//     are dropped whole, payload and terminator.
//   - CSI (ESC [ or U+009B) ends at its final byte, 0x40-0x7E. EL (K) with
//     parameter 0, 1 or 2 becomes an EraseLine segment, CHA (G) to the
//     first column becomes '\r', everything else is dropped. An EL 0 is
//     dropped too when no '\r' or '\b' has been emitted since the last
//     '\n' (nothing can be at or after the cursor): grep --color writes one
//     after every match, and emitting them would split colored output into
//     a segment per match.
//   - ESC followed by intermediates (0x20-0x2F) and a final byte, such as
//     ESC ( B, is dropped, as is any other two-character escape.
//   - An ESC inside any sequence ends it and starts a new one; "ESC \" is
//     simply the case where the new one is ST. So an unterminated "ESC ]"
//     (from cat'ing a binary, or printf '\e]') ends at the next sequence's
//     own ESC, and what follows that sequence is shown. The original
//     sanitizer would read on to the next BEL and lose everything before
//     it.
//   - CAN and SUB cancel a sequence. The four kept controls met inside a
//     CSI or ESC sequence are emitted, other controls there are ignored,
//     and a non-ASCII rune abandons the sequence and is shown.
//
// A string's payload is never stored, and a CSI or ESC sequence that grows
// past the Filter's maxPending bytes is not stored any further (discard
// mode): it is still parsed to its end, then dropped rather than acted on.
// Memory therefore stays bounded for hostile input such as printf '\e]';
// yes, and text after the terminator comes through. Because the bound is
// checked at every byte, the output never depends on how the stream was
// split into chunks.
//
// # Scrollback
//
// Committed lines are packed into 64 KiB chunks with an index of line ends,
// so an append copies only the new bytes and dropping old lines advances an
// index; the history itself is never copied or re-split. The partial line
// is shown as the newest line when it is not empty and counts against the
// byte bound but not the line bound. Append clears it, because the lines
// being committed are what it was showing; the caller sets it again after
// each batch. Dropped counts lines lost to the bounds, including one that
// kept only its newest bytes because it was longer than the byte bound.
//
// # Performance
//
// Plain output is handled a word at a time: the Filter scans eight bytes
// per branch and copies text once, into the Segment; Lines commits runs of
// plain lines by copying them with the CRs squeezed out, without looking at
// the cursor; the Scrollback copies whole batches of lines into a chunk and
// finds their ends eight bytes at a time. Everything else goes through the
// per-rune paths, which are simple enough to be checked against naive
// models by the fuzz tests.
package screen
