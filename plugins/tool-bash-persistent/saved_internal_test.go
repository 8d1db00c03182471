package bashtool

import (
	"io"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var markerLine = regexp.MustCompile(`\[\.\.\. dsh cut (\d+) bytes \((\d+) lines\) here: [^\n]*\.\.\.\]\n`)

// TestSavedFileSplitsAnyOutput: whatever the output and however it is
// chunked, a saved file is the output itself when it fits, else a prefix
// of it, the marker, and a suffix of it, with the marker's counts adding
// up; and the account holds what the file was charged.
func TestSavedFileSplitsAnyOutput(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabets := []string{"ab\n", "abcdefghij\n", "x", "é\nz"}
	for i := range 400 {
		var in strings.Builder
		alpha := []rune(alphabets[i%len(alphabets)])
		for range rng.IntN(3000) {
			in.WriteRune(alpha[rng.IntN(len(alpha))])
		}
		input := in.String()
		maxBytes := int64(2 + rng.IntN(600))
		dir := t.TempDir()
		root, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		head, err := root.OpenFile("out.txt", os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		acct := &savedAccount{limit: 1 << 30, ownerLimit: 1 << 30}
		st := &ownerState{outRoot: root}
		f := newSavedFile(acct, st, root, "out.txt", head, maxBytes)
		for rest := input; rest != ""; {
			n := min(len(rest), 1+rng.IntN(400))
			if rng.IntN(2) == 0 {
				io.WriteString(f, rest[:n])
			} else {
				f.Write([]byte(rest[:n]))
			}
			rest = rest[n:]
		}
		note := f.cutNote()
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		root.Close()
		data, err := os.ReadFile(dir + "/out.txt")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir + "/out.txt" + ringSuffix); !os.IsNotExist(err) {
			t.Fatalf("case %d: the ring file is left: %v", i, err)
		}
		got := string(data)
		if int64(len(input)) <= maxBytes {
			if got != input || note != "" {
				t.Fatalf("case %d: %d bytes in %d: saved %q (note %q), want the output", i, len(input), maxBytes, got, note)
			}
		} else {
			loc := markerLine.FindStringSubmatchIndex(got)
			if loc == nil || note == "" {
				t.Fatalf("case %d: %d bytes in %d: no marker in %q (note %q)", i, len(input), maxBytes, got, note)
			}
			h, tl := got[:loc[0]], got[loc[1]:]
			cut, _ := strconv.Atoi(got[loc[2]:loc[3]])
			lines, _ := strconv.Atoi(got[loc[4]:loc[5]])
			if int64(len(h)) > maxBytes/2 {
				// The head is full and ends inside a line: a newline went
				// before the marker.
				h = strings.TrimSuffix(h, "\n")
			}
			if !strings.HasPrefix(input, h) || int64(len(h)) > maxBytes/2 {
				t.Fatalf("case %d: the head %q is no prefix of the output within %d bytes", i, h, maxBytes/2)
			}
			if !strings.HasSuffix(input, tl) || len(h)+cut+len(tl) != len(input) {
				t.Fatalf("case %d: head %d + cut %d + tail %d bytes, output %d (tail a suffix: %v)", i, len(h), cut, len(tl), len(input), strings.HasSuffix(input, tl))
			}
			if want := strings.Count(input[len(h):len(input)-len(tl)], "\n"); lines != want {
				t.Fatalf("case %d: the marker says %d lines, want %d", i, lines, want)
			}
			if int64(len(h)+len(tl)) > maxBytes {
				t.Fatalf("case %d: %d bytes kept of a bound of %d", i, len(h)+len(tl), maxBytes)
			}
		}
		if acct.used != f.charged || acct.used > maxBytes || len(st.saved.files) != 1 {
			t.Fatalf("case %d: account %d, file charged %d, bound %d, files %v", i, acct.used, f.charged, maxBytes, st.saved.files)
		}
	}
}
