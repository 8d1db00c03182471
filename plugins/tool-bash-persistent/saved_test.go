package bashtool_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// cutNotice is the clipping notice of a result whose saved file was cut:
// group 1 is the total line count, 2 the path, 3 how it was cut.
var cutNotice = regexp.MustCompile(`omitted; the full output \((\d+) lines\) is in (\S+), (cut [^\n]*) \.\.\.\]`)

// savedMarker is the line a cut saved file has where its middle was.
var savedMarker = regexp.MustCompile(`(?m)^\[\.\.\. dsh cut (\d+) bytes \((\d+) lines\) here: a saved output keeps its first (\S+ \S+) and its last (\S+ \S+) \(maxSavedBytes\) \.\.\.\]$`)

// TestSavedOutputKeepsHeadAndTail: past maxSavedBytes, a saved file keeps
// its first and last half around a marker that says what was cut, and the
// result says the file was cut (issue 26, item 4).
func TestSavedOutputKeepsHeadAndTail(t *testing.T) {
	hs := newHarness(t, "{maxSavedBytes: 1048576, maxSavedBytesPerOwner: 4194304, maxSavedBytesTotal: 8388608}", "")
	o := hs.owner(t, "cut")
	got := hs.run(t, o, "seq 1 1000000")
	m := cutNotice.FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("no notice of a cut file in %q", got[max(0, len(got)-400):])
	}
	if m[1] != "1000001" && m[1] != "1000000" || m[3] != "cut to its first 512 KiB and last 512 KiB" {
		t.Fatalf("notice: %q", m[0])
	}
	data, err := os.ReadFile(m[2])
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 1<<20+200 {
		t.Fatalf("the saved file has %d bytes, more than 1 MiB and a marker", len(data))
	}
	mm := savedMarker.FindSubmatchIndex(data)
	if mm == nil {
		t.Fatalf("no marker in the saved file: %q ... %q", data[:200], data[len(data)-200:])
	}
	head, tail := string(data[:mm[0]]), string(data[mm[1]+1:])
	marker := savedMarker.FindStringSubmatch(string(data))
	if marker[3] != "512 KiB" || marker[4] != "512 KiB" {
		t.Fatalf("marker %q", marker[0])
	}
	// The head is 1..k and the tail j..1000000, byte for byte; the marker
	// counts what lies between.
	headLines := strings.Split(strings.TrimSuffix(head, "\n"), "\n")
	tailLines := strings.Split(strings.TrimSuffix(tail, "\n"), "\n")
	for i, l := range headLines[:len(headLines)-1] { // the last one may be cut short
		if l != strconv.Itoa(i+1) {
			t.Fatalf("head line %d is %q", i+1, l)
		}
	}
	first, err := strconv.Atoi(tailLines[0])
	if err != nil {
		t.Fatalf("the tail starts with %q", tailLines[0])
	}
	for i, l := range tailLines {
		if l != strconv.Itoa(first+i) {
			t.Fatalf("tail line %d is %q, want %d", i, l, first+i)
		}
	}
	if last := tailLines[len(tailLines)-1]; last != "1000000" {
		t.Fatalf("the tail ends with %q", last)
	}
	var all strings.Builder
	for i := 1; i <= 1000000; i++ {
		fmt.Fprintf(&all, "%d\n", i)
	}
	if want := all.Len() - len(head) - len(tail); marker[1] != strconv.Itoa(want) {
		t.Errorf("the marker says %s bytes were cut, want %d", marker[1], want)
	}
	if want := 1000000 - strings.Count(head, "\n") - len(tailLines); marker[2] != strconv.Itoa(want) {
		t.Errorf("the marker says %s lines were cut, want %d", marker[2], want)
	}
	// An output that fits is saved whole, without a marker, as before.
	got = hs.run(t, o, "seq 1 100000")
	if cutNotice.MatchString(got) || !strings.Contains(got, "omitted; the full output (100000 lines) is in ") {
		t.Fatalf("a short output's notice: %q", got[max(0, len(got)-400):])
	}
}

// TestSavedOutputsPerOwnerAndInAll: an owner's saved files stay under
// maxSavedBytesPerOwner (its oldest go first), and every owner's under
// maxSavedBytesTotal: a file that would pass it is cut short, and says so.
func TestSavedOutputsPerOwnerAndInAll(t *testing.T) {
	hs := newHarness(t, "{maxSavedBytes: 1048576, maxSavedBytesPerOwner: 2097152, maxSavedBytesTotal: 2621440}", "")
	a, b := hs.owner(t, "a"), hs.owner(t, "b")
	var paths []string
	for range 4 {
		m := cutNotice.FindStringSubmatch(hs.run(t, a, "seq 1 1000000"))
		if m == nil {
			t.Fatal("no notice of a cut file")
		}
		paths = append(paths, m[2])
	}
	dir := filepath.Dir(paths[0])
	if size := dirSize(t, dir); size > 2<<20+1024 {
		t.Fatalf("owner a's saved outputs take %d bytes, more than 2 MiB", size)
	}
	for i, p := range paths {
		_, err := os.Stat(p)
		if kept := err == nil; kept != (i >= 2) {
			t.Errorf("after 4 outputs of 1 MiB with room for 2, output %d kept: %v (%v)", i+1, kept, err)
		}
	}
	// Owner a holds 2 MiB of the 2.5: b's output stops after 512 KiB.
	got := hs.run(t, b, "seq 1 1000000")
	m := cutNotice.FindStringSubmatch(got)
	if m == nil || m[3] != "cut after its first 512 KiB: dsh's saved outputs reached their limit of 2560 KiB (maxSavedBytesTotal)" {
		t.Fatalf("owner b's notice: %q", regexp.MustCompile(`\[\.\.\. [^\n]*\]`).FindString(got))
	}
	data, err := os.ReadFile(m[2])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "1\n2\n3\n") || !strings.Contains(string(data), "\n[... dsh stopped saving here: dsh's saved outputs reached their limit of 2560 KiB (maxSavedBytesTotal); ") {
		t.Fatalf("owner b's file: %q ... %q", data[:20], data[max(0, len(data)-300):])
	}
	if size := dirSize(t, dir) + dirSize(t, filepath.Dir(m[2])); size > 2560<<10+1024 {
		t.Fatalf("saved outputs take %d bytes, more than 2.5 MiB", size)
	}
}

// TestSavedOutputDefaultBound: with the default config, 150 MB of output
// leaves at most 32 MiB in the private directory (it left all of it).
func TestSavedOutputDefaultBound(t *testing.T) {
	if testing.Short() {
		t.Skip("prints 150 MB")
	}
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	hs := newHarness(t, "", "")
	o := hs.owner(t, "big")
	got := hs.run(t, o, "yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c 150000000")
	m := cutNotice.FindStringSubmatch(got)
	if m == nil || m[3] != "cut to its first 16 MiB and last 16 MiB" {
		t.Fatalf("notice: %q", got[max(0, len(got)-400):])
	}
	if size := dirSize(t, filepath.Dir(m[2])); size > 32<<20+1024 {
		t.Fatalf("the saved output takes %d bytes", size)
	}
}

// dirSize is the total size of the files in dir.
func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}
