package backendplugin

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestJournal: a journal keeps every byte while it is short, then its
// first and newest halves, with positions that say what a reader missed;
// its file is private and goes with it.
func TestJournal(t *testing.T) {
	for _, tt := range []struct {
		name   string
		max    int64
		writes []int // sizes of successive writes
	}{
		{"short", 64, []int{10, 20}},
		{"exactly full", 64, []int{32, 32}},
		{"one over", 64, []int{65}},
		{"many small past the bound", 64, []int{7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7}},
		{"one write far larger than the bound", 64, []int{5, 1000, 3}},
		{"wraps the ring several times", 40, []int{13, 29, 31, 17, 11, 23}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j")
			j := newJournal(path, tt.max)
			var all []byte
			for i, n := range tt.writes {
				p := bytes.Repeat([]byte{byte('a' + i%26)}, n)
				for k := range p {
					p[k] = byte('a' + (len(all)+k)%26)
				}
				j.Write(p)
				all = append(all, p...)
			}
			if err := j.Err(); err != nil {
				t.Fatal(err)
			}
			if j.Len() != int64(len(all)) {
				t.Fatalf("Len %d, want %d", j.Len(), len(all))
			}
			head, tail := tt.max/2, tt.max/2
			wantDropped := max(int64(len(all))-head-tail, 0)
			if j.Dropped() != wantDropped {
				t.Fatalf("Dropped %d, want %d", j.Dropped(), wantDropped)
			}
			// Read it all back, a few bytes at a time.
			var got []byte
			var missed int64
			for pos := int64(0); pos < j.Len(); {
				b, from, err := j.ReadFrom(pos, 5)
				if err != nil {
					t.Fatal(err)
				}
				missed += from - pos
				if !bytes.Equal(b, all[from:from+int64(len(b))]) {
					t.Fatalf("read at %d: %q, want %q", from, b, all[from:from+int64(len(b))])
				}
				got = append(got, b...)
				pos = from + int64(len(b))
			}
			if missed != wantDropped || int64(len(got)) != int64(len(all))-wantDropped {
				t.Fatalf("read back %d bytes, missed %d; want %d and %d", len(got), missed, int64(len(all))-wantDropped, wantDropped)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 || fi.Size() > tt.max {
				t.Fatalf("file mode %v size %d, want 0600 and at most %d", fi.Mode().Perm(), fi.Size(), tt.max)
			}
			if err := j.Remove(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Fatalf("file after Remove: %v", err)
			}
		})
	}
}
