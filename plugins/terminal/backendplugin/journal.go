package backendplugin

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
)

// journal is a stream of output text a keeper keeps on disk, in a file of
// its own (0600, in the keeper's private directory), with positions: the
// bytes written since the journal started. It keeps at most max bytes of
// them: the first half of max, and the newest half once the stream is
// longer. What falls between is counted, never kept, so that a command
// that prints without end while no dsh is there to read cannot fill the
// disk; a reader learns how much it misses there. The file is made on the
// first byte and removed with the journal. A journal is guarded by its
// owner's lock.
type journal struct {
	path  string
	head  int64 // the first head bytes stay
	tail  int64 // the newest tail bytes stay, in a ring after them
	f     *os.File
	end   int64 // position after the newest byte
	lines int64 // newlines written
	err   error // the first write error; the journal keeps nothing after it
}

// newJournal returns an empty journal that will keep at most max bytes in
// the file at path.
func newJournal(path string, max int64) *journal {
	max = (max + 1) &^ 1 // two halves
	return &journal{path: path, head: max / 2, tail: max / 2}
}

// Len is the position after the newest byte: how many bytes were written.
func (j *journal) Len() int64 { return j.end }

// Lines is how many newlines were written.
func (j *journal) Lines() int64 { return j.lines }

// Dropped is how many of the bytes written are not kept.
func (j *journal) Dropped() int64 { return max(j.end-j.tail-j.head, 0) }

// first is the position of the oldest byte after the head that is kept.
func (j *journal) first() int64 { return max(j.end-j.tail, j.head) }

// Write appends p. A file that cannot be written loses what follows (the
// journal counts it as dropped), and says so once in the error of Err.
func (j *journal) Write(p []byte) {
	if len(p) == 0 {
		return
	}
	start := j.end
	j.end += int64(len(p))
	j.lines += int64(bytes.Count(p, []byte{'\n'}))
	if j.err != nil {
		return
	}
	if j.f == nil {
		f, err := os.OpenFile(j.path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			j.err = err
			return
		}
		j.f = f
	}
	if start < j.head {
		n := min(int64(len(p)), j.head-start)
		if _, err := j.f.WriteAt(p[:n], start); err != nil {
			j.err = err
			return
		}
		p, start = p[n:], start+n
	}
	if len(p) == 0 {
		return
	}
	if over := int64(len(p)) - j.tail; over > 0 {
		p, start = p[over:], start+over
	}
	for len(p) > 0 {
		at := (start - j.head) % j.tail
		n := min(int64(len(p)), j.tail-at)
		if _, err := j.f.WriteAt(p[:n], j.head+at); err != nil {
			j.err = err
			return
		}
		p, start = p[n:], start+n
	}
}

// Err is the first error of the journal's file, if any.
func (j *journal) Err() error { return j.err }

// ReadFrom returns at most limit bytes from position pos on, and the
// position they start at: after pos when the bytes from pos were dropped
// (the difference is what the reader misses).
func (j *journal) ReadFrom(pos int64, limit int) ([]byte, int64, error) {
	if pos >= j.head && pos < j.first() {
		pos = j.first()
	}
	n := min(int64(limit), j.end-pos)
	if pos < j.head {
		// One read stays in the head: what follows it may have been
		// dropped, which the next read skips.
		n = min(n, j.head-pos)
	}
	if n <= 0 || j.f == nil {
		return nil, pos, j.err
	}
	out := make([]byte, n)
	if pos < j.head {
		if _, err := j.f.ReadAt(out, pos); err != nil {
			return nil, pos, err
		}
		return out, pos, nil
	}
	// The ring may wrap once within the read.
	for done, at := int64(0), pos; done < n; {
		r := (at - j.head) % j.tail
		want := min(n-done, j.tail-r)
		if _, err := j.f.ReadAt(out[done:done+want], j.head+r); err != nil {
			return nil, pos, err
		}
		done, at = done+want, at+want
	}
	return out, pos, nil
}

// Remove deletes the journal's file; the journal is empty afterwards.
func (j *journal) Remove() error {
	j.end, j.lines, j.err = 0, 0, nil
	if j.f == nil {
		return nil
	}
	j.f.Close()
	j.f = nil
	if err := os.Remove(j.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
