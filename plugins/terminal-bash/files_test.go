//go:build linux

package terminalbash

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// TestHostFilesDirectoryRemoved: a session's directory of files that a
// command removed is replaced by a new one, never made again by its name,
// in the owner's directory; appending to a file that went with it fails;
// purge removes what is left.
func TestHostFilesDirectoryRemoved(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	f := &hostFiles{owner: "files-test"}
	first, err := f.write(termapi.FileRequest{Name: "a.txt", Data: []byte("one\n")})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Dir(first)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.write(termapi.FileRequest{Name: "a.txt", Data: []byte("two\n"), Append: true}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("appending to a removed file: %v, want %v", err, fs.ErrNotExist)
	}
	second, err := f.write(termapi.FileRequest{Name: "b.txt", Data: []byte("three\n")})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(second) == filepath.Dir(first) || filepath.Dir(filepath.Dir(second)) != filepath.Dir(filepath.Dir(first)) {
		t.Fatalf("second directory %s after %s: want a new one in the owner's directory", filepath.Dir(second), filepath.Dir(first))
	}
	if data, err := os.ReadFile(second); err != nil || string(data) != "three\n" {
		t.Fatalf("%s: %q, %v", second, data, err)
	}
	if err := f.purge(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(second)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after purge: %v", err)
	}
}
