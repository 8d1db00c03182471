package bashtool

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"unsafe"
)

// A saved output is the file that holds a clipped call's whole output, for
// the model to grep. What dsh writes there is bounded three ways, so that a
// command printing without end fills neither dsh's private directory (a RAM
// tmpfs on most systems) nor the machine:
//
//   - each file keeps the first and the last half of MaxSavedBytes, around
//     a marker line that says how much was cut and where (the newest bytes
//     wait in a ring file beside it until the call ends);
//   - an owner's files together stay under MaxSavedBytesPerOwner: the
//     owner's oldest files are removed to make room for its new one;
//   - every owner's files together stay under MaxSavedBytesTotal: a file
//     that would pass it (after the owner's own older files are gone) stops
//     growing there, and its marker says so.
//
// The result's clipping notice says when its file was cut.

// savedAccount counts the bytes of saved outputs on disk, in all and per
// owner, and removes an owner's oldest files to make room for its new ones.
type savedAccount struct {
	mu         sync.Mutex
	used       int64
	limit      int64 // MaxSavedBytesTotal
	ownerLimit int64 // MaxSavedBytesPerOwner
}

// savedEntry is a finished saved file, with the bytes charged for it.
type savedEntry struct {
	name string
	size int64
}

// ownerSaved is an owner's part of the account, guarded by savedAccount.mu.
type ownerSaved struct {
	used  int64
	files []savedEntry // finished files, oldest first
	// gen counts the owner's output directories: a file of an earlier one
	// (removed with it) gives its charge back instead of joining files.
	gen int
	// evicted are the files removed to make room that have a copy where
	// the owner's shell runs (ownerState.copies): the copies go too, once
	// the call is over (dropEvictedCopies).
	evicted []string
}

// Why a saved output stopped growing.
const (
	stopOwner = "this agent's saved outputs reached their limit of %s (maxSavedBytesPerOwner)"
	stopTotal = "dsh's saved outputs reached their limit of %s (maxSavedBytesTotal)"
)

// charge takes up to n bytes for a file of st in directory root, removing
// st's oldest finished files while that makes room. It returns how many
// bytes it took and, when fewer than n, why.
func (a *savedAccount) charge(st *ownerState, n int64) (int64, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for {
		ownerFree, totalFree := a.ownerLimit-st.saved.used, a.limit-a.used
		if n <= ownerFree && n <= totalFree {
			st.saved.used += n
			a.used += n
			return n, ""
		}
		if len(st.saved.files) == 0 {
			got := max(0, min(n, ownerFree, totalFree))
			st.saved.used += got
			a.used += got
			if ownerFree < totalFree {
				return got, fmt.Sprintf(stopOwner, formatBytes(a.ownerLimit))
			}
			return got, fmt.Sprintf(stopTotal, formatBytes(a.limit))
		}
		old := st.saved.files[0]
		st.saved.files = st.saved.files[1:]
		if st.outRoot != nil {
			// Gone already (the model removed it) is as good.
			_ = st.outRoot.Remove(old.name)
		}
		if _, ok := st.copies[old.name]; ok {
			st.saved.evicted = append(st.saved.evicted, old.name)
		}
		st.saved.used -= old.size
		a.used -= old.size
	}
}

// finish records a finished file of st's directory generation gen, or
// gives back its charge when that directory has gone.
func (a *savedAccount) finish(st *ownerState, gen int, e savedEntry) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if gen != st.saved.gen {
		a.used -= e.size
		return
	}
	st.saved.files = append(st.saved.files, e)
}

// forget gives back every charge of st's directory, which has gone.
func (a *savedAccount) forget(st *ownerState) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.used -= st.saved.used
	st.saved.used = 0
	st.saved.files = nil
	st.saved.gen++
}

// ringSuffix names the file that holds a saved output's newest bytes while
// the call runs.
const ringSuffix = ".tail"

// savedFile is one saved output being written: its first headMax bytes go
// to the file itself, the bytes after them to a ring of tailMax bytes,
// which Close appends, after a marker when anything was cut.
type savedFile struct {
	acct *savedAccount
	st   *ownerState
	gen  int
	root *os.Root
	name string

	head             *os.File
	ring             *os.File // nil until the head is full
	headMax, tailMax int64
	headLen          int64 // bytes in the file
	ringLen, ringPos int64 // bytes in the ring, where the next one goes
	total            int64 // bytes written
	charged          int64 // bytes taken from the account
	lines, headLines int64 // newlines written, and in the head
	headNL           bool  // the head ends with a newline
	trimmed          int64 // bytes the head lost to end at a line's end
	stopped          string
	err              error
}

// newSavedFile starts a saved output in head, a file of st's directory
// root named name.
func newSavedFile(acct *savedAccount, st *ownerState, root *os.Root, name string, head *os.File, maxBytes int64) *savedFile {
	return &savedFile{acct: acct, st: st, gen: st.saved.gen, root: root, name: name, head: head, headMax: maxBytes / 2, tailMax: maxBytes - maxBytes/2, headNL: true}
}

func (f *savedFile) Write(p []byte) (int, error) {
	f.write(p)
	return len(p), f.err
}

func (f *savedFile) WriteString(s string) (int, error) {
	// The bytes are only read, as os.File.WriteString reads them: no copy
	// of a long output's every chunk.
	f.write(unsafe.Slice(unsafe.StringData(s), len(s)))
	return len(s), f.err
}

func (f *savedFile) write(p []byte) {
	f.total += int64(len(p))
	f.lines += int64(bytes.Count(p, []byte{'\n'}))
	if f.err != nil || f.stopped != "" {
		return
	}
	if room := f.headMax - f.headLen; room > 0 {
		n := f.take(min(room, int64(len(p))))
		if _, err := f.head.Write(p[:n]); err != nil {
			f.err = err
			return
		}
		f.headLen += n
		f.headLines += int64(bytes.Count(p[:n], []byte{'\n'}))
		if n > 0 {
			f.headNL = p[n-1] == '\n'
		}
		if f.stopped != "" {
			return
		}
		p = p[n:]
	}
	if len(p) == 0 {
		return
	}
	if f.ring == nil {
		ring, err := f.root.OpenFile(f.name+ringSuffix, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
		if err != nil {
			f.err = fmt.Errorf("create the tail of a saved output: %w", err)
			return
		}
		f.ring = ring
	}
	// The ring grows until it holds tailMax bytes, then the newest bytes
	// overwrite the oldest; only growth is charged.
	if grow := min(f.tailMax-f.ringLen, int64(len(p))); grow > 0 {
		if n := f.take(grow); n < grow {
			p = p[:n] // the ring has not wrapped: these follow what it holds
		}
	}
	if over := int64(len(p)) - f.tailMax; over > 0 {
		f.advance(over) // overwritten before they would be read
		p = p[over:]
	}
	for len(p) > 0 {
		chunk := p[:min(int64(len(p)), f.tailMax-f.ringPos)]
		if _, err := f.ring.WriteAt(chunk, f.ringPos); err != nil {
			f.err = err
			return
		}
		f.advance(int64(len(chunk)))
		p = p[len(chunk):]
	}
}

// take charges up to n bytes and stops the file when it gets fewer.
func (f *savedFile) take(n int64) int64 {
	got, why := f.acct.charge(f.st, n)
	f.charged += got
	if got < n {
		f.stopped = why
	}
	return got
}

// advance moves the ring's write position by n bytes.
func (f *savedFile) advance(n int64) {
	f.ringLen = min(f.tailMax, f.ringLen+n)
	f.ringPos = (f.ringPos + n) % f.tailMax
}

// cutNote is the clause of the clipping notice saying how the file was
// cut; "" when it holds the whole output.
func (f *savedFile) cutNote() string {
	switch {
	case f.stopped != "":
		return fmt.Sprintf(", cut after its first %s: %s", formatBytes(f.headLen+f.ringLen), f.stopped)
	case f.total > f.headLen+f.ringLen:
		return fmt.Sprintf(", cut to its first %s and last %s", formatBytes(f.headMax), formatBytes(f.tailMax))
	}
	return ""
}

// Close writes the marker and the tail after the head, removes the ring,
// and records the file with the owner's saved outputs.
func (f *savedFile) Close() error {
	err := f.finishTail()
	if cerr := f.head.Close(); err == nil {
		err = cerr
	}
	if f.ring != nil {
		f.ring.Close()
		if rerr := f.root.Remove(f.name + ringSuffix); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
			err = rerr
		}
	}
	f.acct.finish(f.st, f.gen, savedEntry{name: f.name, size: f.charged})
	if f.err != nil {
		return f.err
	}
	return err
}

// tailProbe is how far into a cut tail its first line start is looked for.
const tailProbe = 4096

func (f *savedFile) finishTail() error {
	if f.err != nil || f.ring == nil && f.stopped == "" {
		return nil
	}
	cut := f.total - f.headLen - f.ringLen
	if cut == 0 || f.stopped != "" {
		// The ring never wrapped: it follows the head as it is.
		if f.ring != nil {
			if _, err := io.Copy(f.head, io.NewSectionReader(f.ring, 0, f.ringLen)); err != nil {
				return err
			}
		}
		if f.stopped == "" {
			return nil
		}
		saved := f.headLen + f.ringLen
		_, err := fmt.Fprintf(f.head, "%s[... dsh stopped saving here: %s; %d more bytes are not saved ...]\n", f.newline(), f.stopped, f.total-saved)
		return err
	}
	// The head ends, and the tail starts, at a line's start when one is
	// near.
	if err := f.trimHead(); err != nil {
		return err
	}
	probe := make([]byte, min(tailProbe, f.ringLen))
	if _, err := io.ReadFull(f.tailReader(0), probe); err != nil {
		return err
	}
	var skip int64
	if i := bytes.IndexByte(probe, '\n'); i >= 0 && int64(i+1) < f.ringLen {
		skip = int64(i + 1)
	}
	tailLines, err := countLines(f.tailReader(skip))
	if err != nil {
		return err
	}
	cutLines := f.lines - f.headLines - tailLines
	if _, err := fmt.Fprintf(f.head, "%s[... dsh cut %d bytes (%d lines) here: a saved output keeps its first %s and its last %s (maxSavedBytes) ...]\n",
		f.newline(), cut+skip+f.trimmed, max(cutLines, 0), formatBytes(f.headMax), formatBytes(f.tailMax)); err != nil {
		return err
	}
	_, err = io.Copy(f.head, f.tailReader(skip))
	return err
}

// trimHead cuts the head back to the end of its last line, when that is
// within tailProbe bytes of its end.
func (f *savedFile) trimHead() error {
	if f.headNL {
		return nil
	}
	n := min(tailProbe, f.headLen)
	last := make([]byte, n)
	if _, err := f.head.ReadAt(last, f.headLen-n); err != nil {
		return err
	}
	i := bytes.LastIndexByte(last, '\n')
	if i < 0 {
		return nil
	}
	keep := f.headLen - n + int64(i) + 1
	if err := f.head.Truncate(keep); err != nil {
		return err
	}
	if _, err := f.head.Seek(keep, io.SeekStart); err != nil {
		return err
	}
	f.trimmed = f.headLen - keep
	f.headLen, f.headNL = keep, true
	return nil
}

// newline is what goes before a marker: a newline unless the head ends in
// one.
func (f *savedFile) newline() string {
	if f.headNL {
		return ""
	}
	return "\n"
}

// tailReader reads the ring oldest first, from its from-th byte on.
func (f *savedFile) tailReader(from int64) io.Reader {
	if f.ringLen < f.tailMax {
		return io.NewSectionReader(f.ring, from, f.ringLen-from)
	}
	first := f.tailMax - f.ringPos // the oldest bytes: from ringPos to the end
	if from < first {
		return io.MultiReader(io.NewSectionReader(f.ring, f.ringPos+from, first-from), io.NewSectionReader(f.ring, 0, f.ringPos))
	}
	return io.NewSectionReader(f.ring, from-first, f.tailMax-from)
}

// countLines counts the newlines r holds.
func countLines(r io.Reader) (int64, error) {
	buf := make([]byte, 32<<10)
	var n int64
	for {
		k, err := r.Read(buf)
		n += int64(bytes.Count(buf[:k], []byte{'\n'}))
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// formatBytes writes a size the way the notices do: whole MiB or KiB when
// it is one, else bytes.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
