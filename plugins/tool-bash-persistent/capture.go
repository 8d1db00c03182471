package bashtool

import (
	"fmt"
	"io"
	"regexp"
	"strings"
	"unicode/utf8"
)

// capture follows one call's terminal output through the markers:
//
//	before  text ahead of the start marker: the rest of the prompt, and output
//	        background jobs produced between calls ("stray" output)
//	during  the command's output, streamed into a sink that keeps the head,
//	        the tail, and (once it outgrows the limit) the whole thing in a file
//	jobs    bash's notices about background jobs (jobs -n), also output,
//	        except the "Running" lines for jobs the command just started
//	after   what follows the end marker: output of a PROMPT_COMMAND the
//	        model set, and the prompt; none of it is the command's, and it
//	        is dropped
//
// Input arrives as complete lines (Send.Output), so a marker is never split
// across two pushes; the line still being written at settle time arrives
// through finish.
type capture struct {
	m      markers
	state  int
	status int
	sink   *sink
	stray  boundedText // before the start marker
	// pending is the line that was still being written when the last send
	// settled. The terminal keeps writing it, so the next send delivers it
	// again once it is complete; it is held here until then, or until the
	// call ends (flush).
	pending string
}

const (
	stateBefore = iota
	stateDuring
	stateJobs
	stateAfter
)

// straySize bounds the text kept from outside the markers: it is shown to the
// model only as a short note, never as the result itself.
const straySize = 4096

func newCapture(m markers, s *sink) *capture {
	return &capture{m: m, sink: s, stray: boundedText{max: straySize}}
}

// ended reports whether the end marker (and so the exit status) was seen.
func (c *capture) ended() bool { return c.state == stateAfter }

// started reports whether the start marker was seen.
func (c *capture) started() bool { return c.state != stateBefore }

// push consumes complete lines of terminal output.
func (c *capture) push(text string) error {
	// The held line comes again, completed, at the start of text: the
	// terminal went on writing the same line.
	c.pending = ""
	return c.consume(text)
}

// flush hands the held partial line to the state machine: the call is
// ending, and that line is what the terminal shows last.
func (c *capture) flush() {
	p := c.pending
	c.pending = ""
	_ = c.consume(p)
}

func (c *capture) consume(text string) error {
	for text != "" {
		switch c.state {
		case stateBefore:
			i := strings.Index(text, c.m.start())
			if i < 0 {
				c.stray.add(text)
				return nil
			}
			c.stray.add(text[:i])
			text = afterLine(text[i+len(c.m.start()):])
			c.state = stateDuring
		case stateDuring:
			// The jobs marker follows the output directly, so it may share
			// the output's last line.
			i := strings.Index(text, c.m.jobs())
			if i < 0 {
				if at, _, status, ok := c.m.parseEnd(text); ok {
					// The wrapper never reached the jobs marker's line on
					// its own; treat the end marker alike.
					c.status, c.state = status, stateAfter
					return c.sink.write(text[:at])
				}
				return c.sink.write(text)
			}
			if err := c.sink.write(text[:i]); err != nil {
				return err
			}
			text = afterLine(text[i+len(c.m.jobs()):])
			c.state = stateJobs
		case stateJobs:
			line, rest, _ := strings.Cut(text, "\n")
			text = rest
			if at, _, status, ok := c.m.parseEnd(line); ok {
				c.status, c.state = status, stateAfter
				line = line[:at]
				if line == "" {
					continue
				}
			}
			if runningJob.MatchString(line) {
				continue
			}
			if err := c.sink.write(line + "\n"); err != nil {
				return err
			}
		case stateAfter:
			return nil
		}
	}
	return nil
}

// runningJob matches the line jobs -n prints for a job that just started.
var runningJob = regexp.MustCompile(`^\[\d+\][+-]? +Running +`)

// afterLine returns what follows the first newline of s.
func afterLine(s string) string {
	if nl := strings.IndexByte(s, '\n'); nl >= 0 {
		return s[nl+1:]
	}
	return ""
}

// finish takes the line being written when a send settled. At a controlled
// prompt that line ends with the prompt itself, which is dropped; otherwise
// it is real output (a program's own prompt, say "Name: "), held until it
// completes or the call ends.
func (c *capture) finish(partial string, atPrompt bool) {
	if atPrompt {
		for strings.HasSuffix(partial, prompt) {
			partial = strings.TrimSuffix(partial, prompt)
		}
	}
	c.pending = partial
}

// strayNote returns the cleaned text that appeared before the start marker,
// or "".
func (c *capture) strayNote() string { return cleanTerminalNoise(c.stray.String(), c.m) }

// prompt is the backend's controlled prompt. The tool does not depend on
// it for correctness (markers delimit output); it only uses it to keep
// prompts out of the notes about text outside the markers.
const prompt = "dsh> "

func stripPrompts(s string) string {
	for strings.HasPrefix(s, prompt) {
		s = s[len(prompt):]
	}
	return s
}

// cleanTerminalNoise removes what the terminal showed that is not output:
// prompts, and any line of the tool's own plumbing (an echoed wrapper line
// when the model turned echo back on).
func cleanTerminalNoise(s string, m markers) string {
	var kept []string
	for line := range strings.SplitSeq(s, "\n") {
		line = strings.TrimRight(stripPrompts(line), " ")
		if line == "" || strings.Contains(line, "__dsh_") {
			continue
		}
		kept = append(kept, line)
	}
	return strings.Join(kept, "\n")
}

// boundedText keeps the last max bytes appended to it, cut at a rune
// boundary.
type boundedText struct {
	max int
	b   []byte
}

func (t *boundedText) add(s string) {
	t.b = append(t.b, s...)
	if len(t.b) > 2*t.max {
		t.b = trimToLastBytes(t.b, t.max)
	}
}

func (t *boundedText) String() string { return string(trimToLastBytes(t.b, t.max)) }

func trimToLastBytes(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	cut := len(b) - n
	for cut < len(b) && !utf8.RuneStart(b[cut]) {
		cut++
	}
	return append(b[:0:0], b[cut:]...)
}

// sink holds a command's output the way the model will see it: the first
// and last limit characters in memory, the total count, and, once the output
// is longer than the limit, the whole output in a file (opened lazily by
// open) so the model can grep what was left out. Characters are runes; a
// rune is never split.
type sink struct {
	limit int
	open  func() (io.WriteCloser, string, error)

	head      strings.Builder // the first limit runes
	headRunes int
	tail      []byte // the newest text, trimmed to about limit runes
	runes     int    // total runes written
	lines     int    // total newlines written
	overflow  bool

	file    io.WriteCloser
	path    string
	fileErr error
	pendNL  bool // a trailing newline held back: the last one is not output
}

func newSink(limit int, open func() (io.WriteCloser, string, error)) *sink {
	return &sink{limit: limit, open: open}
}

// write appends output. The last newline is held back until more text
// follows, because the newline that ends the output's last line belongs to
// the terminal, not to the result ("printf 'a\n'" and "printf a" both show
// "a").
func (s *sink) write(text string) error {
	if text == "" {
		return nil
	}
	if s.pendNL {
		s.pendNL = false
		s.add("\n")
	}
	if strings.HasSuffix(text, "\n") {
		text = text[:len(text)-1]
		s.pendNL = true
	}
	s.add(text)
	return nil
}

func (s *sink) add(text string) {
	if text == "" {
		return
	}
	n := utf8.RuneCountInString(text)
	s.runes += n
	s.lines += strings.Count(text, "\n")
	if !s.overflow {
		if s.headRunes+n <= s.limit {
			s.head.WriteString(text)
			s.headRunes += n
			s.tail = append(s.tail, text...)
			return
		}
		s.overflow = true
		s.startFile()
		room := s.limit - s.headRunes
		cut := runeOffset(text, room)
		s.head.WriteString(text[:cut])
		s.headRunes = s.limit
	}
	if s.file != nil {
		if _, err := io.WriteString(s.file, text); err != nil && s.fileErr == nil {
			s.fileErr = err
		}
	}
	s.tail = append(s.tail, text...)
	// Keep the tail near limit runes (at most 4 bytes each) without
	// trimming on every write.
	if len(s.tail) > 8*s.limit+4096 {
		s.tail = lastRunes(s.tail, s.limit)
	}
}

// dropTrailingLine removes line from the end of a short output, if it is
// the output's last line.
func (s *sink) dropTrailingLine(line string) {
	if s.overflow {
		return
	}
	h := s.head.String()
	var rest string
	switch {
	case h == line:
		rest = ""
	case strings.HasSuffix(h, "\n"+line):
		rest = h[:len(h)-len(line)-1]
	default:
		return
	}
	s.head.Reset()
	s.head.WriteString(rest)
	s.headRunes = utf8.RuneCountInString(rest)
	s.runes = s.headRunes
	s.lines = strings.Count(rest, "\n")
	s.tail = append(s.tail[:0], rest...)
	s.pendNL = false
}

// startFile opens the full-output file and writes what came before.
func (s *sink) startFile() {
	if s.open == nil {
		return
	}
	f, path, err := s.open()
	if err != nil {
		s.fileErr = err
		return
	}
	s.file, s.path = f, path
	if _, err := io.WriteString(f, s.head.String()); err != nil {
		s.fileErr = err
	}
}

// close finishes the output file, adding the held-back newline so the file
// ends like a text file.
func (s *sink) close() {
	if s.file == nil {
		return
	}
	if s.pendNL {
		if _, err := io.WriteString(s.file, "\n"); err != nil && s.fileErr == nil {
			s.fileErr = err
		}
	}
	if err := s.file.Close(); err != nil && s.fileErr == nil {
		s.fileErr = err
	}
	s.file = nil
}

// text renders the output for the model: everything when it fits, else the
// head and the tail around a notice saying what was left out and where the
// whole output is.
func (s *sink) text() string {
	if !s.overflow {
		return s.head.String()
	}
	headBudget := s.limit * 2 / 5
	tailBudget := s.limit - headBudget
	head := s.head.String()
	head = head[:runeOffset(head, headBudget)]
	tail := string(lastRunes(s.tail, tailBudget))
	// Prefer whole lines when a line break is near the cut.
	if i := strings.LastIndexByte(head, '\n'); i >= 0 && utf8.RuneCountInString(head[i:]) <= headBudget/4 {
		head = head[:i+1]
	}
	if i := strings.IndexByte(tail, '\n'); i >= 0 && utf8.RuneCountInString(tail[:i]) <= tailBudget/4 {
		tail = tail[i+1:]
	}
	omitted := s.runes - utf8.RuneCountInString(head) - utf8.RuneCountInString(tail)
	omittedLines := s.lines - strings.Count(head, "\n") - strings.Count(tail, "\n")
	var where string
	switch {
	case s.path != "" && s.fileErr == nil:
		where = fmt.Sprintf("; the full output (%d lines) is in %s", s.lines+1, s.path)
	case s.fileErr != nil:
		where = fmt.Sprintf("; the full output could not be saved: %v", s.fileErr)
	}
	if !strings.HasSuffix(head, "\n") {
		head += "\n"
	}
	return fmt.Sprintf("%s[... %d characters (%d lines) omitted%s ...]\n%s", head, omitted, max(omittedLines, 0), where, tail)
}

// runeOffset returns the byte offset of the n-th rune of s (len(s) if s is
// shorter).
func runeOffset(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}

// lastRunes returns the last n runes of b.
func lastRunes(b []byte, n int) []byte {
	i := len(b)
	for n > 0 && i > 0 {
		_, size := utf8.DecodeLastRune(b[:i])
		i -= size
		n--
	}
	return append(b[:0:0], b[i:]...)
}
