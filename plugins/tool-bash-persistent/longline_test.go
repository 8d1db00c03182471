package bashtool_test

import (
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// savedFile finds the saved-output path a clipped result names, and the
// line count it claims.
var savedFile = regexp.MustCompile(`\[\.\.\. \d+ characters \((\d+) lines?\) omitted; the full output \((\d+) lines?\) is in (\S+) \.\.\.\]`)

// TestLongLineSurvivesByteForByte: a line far longer than the backend's
// read bound (256 KiB) is one line, byte for byte, in the saved file, and
// counts as one; nothing is inserted where the backend handed it out in
// pieces.
func TestLongLineSurvivesByteForByte(t *testing.T) {
	hs := newHarness(t, "{maxOutputChars: 2000}", "")
	o := hs.owner(t, "longline")
	raw := make([]byte, 3<<18) // 768 KiB, 1 MiB once in base64
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	line := base64.StdEncoding.EncodeToString(raw)
	src := filepath.Join(t.TempDir(), "line.txt")
	if err := os.WriteFile(src, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, command, saved string }{
		{"ended by a newline", "cat " + src, line + "\n"},
		{"without a newline", "tr -d '\\n' < " + src, line},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := hs.run(t, o, tt.command)
			m := savedFile.FindStringSubmatch(got)
			if m == nil {
				t.Fatalf("no clipping notice in %q", clip(got, 300))
			}
			if m[1] != "0" || m[2] != "1" {
				t.Fatalf("notice counts %s omitted lines of %s, want 0 of 1: %s", m[1], m[2], m[0])
			}
			data, err := os.ReadFile(m[3])
			if err != nil {
				t.Fatal(err)
			}
			if string(data) != tt.saved {
				t.Fatalf("saved file differs from the output:\n%s", diff(string(data), tt.saved))
			}
			head, _, _ := strings.Cut(got, "\n[... ")
			if !strings.HasPrefix(line, head) {
				t.Fatalf("the head shown is not the line's start: %q", clip(head, 100))
			}
		})
	}
}

// savedLines are the lines a clipped result ends with, naming its files.
var savedLines = regexp.MustCompile(`(\n\[(full output|output of background jobs): (\S+)\])+$`)

// withoutSavedLines returns got without the saved-file lines it ends with,
// checking that each names a file that exists.
func withoutSavedLines(t testing.TB, got string) string {
	t.Helper()
	m := savedLines.FindStringIndex(got)
	if m == nil {
		return got
	}
	for _, line := range strings.Split(got[m[0]+1:], "\n") {
		path := line[strings.Index(line, ": ")+2 : len(line)-1]
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("%q names a file that is not there: %v", line, err)
		}
	}
	return got[:m[0]]
}

// TestClippedResultEndsWithThePath: a client that cuts the middle of a long
// result (where the notice is) still leaves the saved file's path on the
// last line.
func TestClippedResultEndsWithThePath(t *testing.T) {
	hs := newHarness(t, "{maxOutputChars: 500}", "")
	o := hs.owner(t, "lastline")
	for _, tt := range []struct{ name, command, before string }{
		{"success", "seq 1 10000", "10000"},
		{"failure", "seq 1 10000; false", "[exit code: 1]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := hs.run(t, o, tt.command)
			m := savedFile.FindStringSubmatch(got)
			if m == nil {
				t.Fatalf("no clipping notice in %q", got)
			}
			lines := strings.Split(got, "\n")
			if last, want := lines[len(lines)-1], "[full output: "+m[3]+"]"; last != want {
				t.Fatalf("last line %q, want %q", last, want)
			}
			if prev := lines[len(lines)-2]; prev != tt.before {
				t.Fatalf("line before the path %q, want %q", prev, tt.before)
			}
		})
	}
	if got := hs.run(t, o, "seq 1 3"); strings.Contains(got, "[full output") {
		t.Fatalf("an unclipped result names a file: %q", got)
	}
}
