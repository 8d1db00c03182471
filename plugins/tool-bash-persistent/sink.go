package bashtool

import (
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// sink holds a command's output the way the model will see it: the first
// and last limit characters in memory, the total count, and, once the output
// is longer than the limit, the whole output in a file (opened lazily by
// open; see savedFile for its own bounds) so the model can grep what was
// left out. Characters are runes; a
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
	pendNL  bool   // a trailing newline held back: the last one is not output
	cut     string // how the file was cut, once it is closed

	// finished: the file is closed and, where the shell needs a copy of
	// its own, copied (finish).
	finished bool
}

func newSink(limit int, open func() (io.WriteCloser, string, error)) *sink {
	return &sink{limit: limit, open: open}
}

// write appends output. The last newline is held back until more text
// follows, because the newline that ends the output's last line belongs to
// the terminal, not to the result ("printf 'a\n'" and "printf a" both show
// "a").
func (s *sink) write(text string) {
	if text == "" {
		return
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
	// trimming on every write. The trim moves the newest runes to the
	// front of the same array: a command's output, however long, then
	// costs no allocation here once the tail has grown to its size.
	if len(s.tail) > 8*s.limit+4096 {
		keep := lastRunes(s.tail, s.limit)
		s.tail = s.tail[:copy(s.tail, s.tail[len(s.tail)-len(keep):])]
	}
}

// atLineStart reports whether what is written next starts a line.
func (s *sink) atLineStart() bool { return s.runes == 0 || s.pendNL }

// trimTrailingNewlines removes the empty lines the output ends with (the
// file, if there is one, keeps them).
func (s *sink) trimTrailingNewlines() {
	s.pendNL = false
	n := len(s.tail) - len(strings.TrimRight(string(s.tail), "\n"))
	s.tail = s.tail[:len(s.tail)-n]
	s.runes -= n
	s.lines -= n
	if !s.overflow {
		h := strings.TrimRight(s.head.String(), "\n")
		s.head.Reset()
		s.head.WriteString(h)
		s.headRunes -= n
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

// jobAnnouncement is how an interactive bash announces a job it started
// in the background: "[3] 12345".
var jobAnnouncement = regexp.MustCompile(`^\[(\d+)\] \d+$`)

// takeJobAnnouncement removes bash's announcement of a background job from
// the start of a short output and returns the job's number.
func (s *sink) takeJobAnnouncement() (int, bool) {
	if s.overflow {
		return 0, false
	}
	h := s.head.String()
	first, rest, more := strings.Cut(h, "\n")
	m := jobAnnouncement.FindStringSubmatch(first)
	if m == nil {
		return 0, false
	}
	job, err := strconv.Atoi(m[1])
	if err != nil {
		return 0, false
	}
	if !more {
		rest = ""
		s.pendNL = false
	}
	s.head.Reset()
	s.head.WriteString(rest)
	s.headRunes = utf8.RuneCountInString(rest)
	s.runes = s.headRunes
	s.lines = strings.Count(rest, "\n")
	s.tail = append(s.tail[:0], rest...)
	return job, true
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
	s.cutNote()
	if err := s.file.Close(); err != nil && s.fileErr == nil {
		s.fileErr = err
	}
	s.file = nil
}

// finish closes the output file and, when copy is not nil, has the file
// copied where the shell can read it, which the result then names instead.
// It does something once.
func (s *sink) finish(copy func(local string) (string, error)) {
	if s.finished {
		return
	}
	s.finished = true
	s.close()
	if copy == nil || s.saved() == "" {
		return
	}
	path, err := copy(s.path)
	if err != nil {
		s.fileErr = err
		return
	}
	s.path = path
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
		where = fmt.Sprintf("; the full output (%d lines) is in %s%s", s.lines+1, s.path, s.cutNote())
	case s.fileErr != nil:
		where = fmt.Sprintf("; the full output could not be saved: %v", s.fileErr)
	}
	if !strings.HasSuffix(head, "\n") {
		head += "\n"
	}
	return fmt.Sprintf("%s[... %d characters (%d lines) omitted%s ...]\n%s", head, omitted, max(omittedLines, 0), where, tail)
}

// cutNote says how the saved file was cut, when it was (see savedFile).
func (s *sink) cutNote() string {
	if c, ok := s.file.(interface{ cutNote() string }); ok {
		s.cut = c.cutNote()
	}
	return s.cut
}

// saved is the file holding the whole output, when the output was clipped
// and the file was written without error; "" otherwise.
func (s *sink) saved() string {
	if !s.overflow || s.fileErr != nil {
		return ""
	}
	return s.path
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

// lastRunes returns the last n runes of b, a slice of b.
func lastRunes(b []byte, n int) []byte {
	i := len(b)
	for n > 0 && i > 0 {
		_, size := utf8.DecodeLastRune(b[:i])
		i -= size
		n--
	}
	return b[i:]
}
