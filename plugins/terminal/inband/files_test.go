package inband

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// TestFarFilesAfterStartupNoise: the directory of files is found in what
// the far end prints, whatever its startup files print first.
func TestFarFilesAfterStartupNoise(t *testing.T) {
	f := NewFarFiles(func(ctx context.Context, argv []string, stdin []byte) (FarResult, error) {
		return localRun(ctx, noisy(argv), stdin)
	})
	ctx := context.Background()
	path, err := f.Write(ctx, termapi.FileRequest{Name: "a.txt", Data: []byte("one\n")})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Purge(ctx)
	if data, err := os.ReadFile(path); err != nil || string(data) != "one\n" {
		t.Fatalf("%s: %q, %v", path, data, err)
	}
}

// TestFarFilesDirectoryRemoved: a directory of files a command removed is
// replaced by a new one, never made again by its name; appending to a
// file that went with it fails.
func TestFarFilesDirectoryRemoved(t *testing.T) {
	f := NewFarFiles(localRun)
	ctx := context.Background()
	first, err := f.Write(ctx, termapi.FileRequest{Name: "a.txt", Data: []byte("one\n")})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Purge(ctx)
	if err := os.RemoveAll(filepath.Dir(first)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(ctx, termapi.FileRequest{Name: "a.txt", Data: []byte("two\n"), Append: true}); !errors.Is(err, ErrFilesGone) {
		t.Fatalf("appending to a removed file: %v, want %v", err, ErrFilesGone)
	}
	second, err := f.Write(ctx, termapi.FileRequest{Name: "b.txt", Data: []byte("three\n")})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(second) == filepath.Dir(first) {
		t.Fatalf("the removed directory %s was made again by its name", filepath.Dir(first))
	}
	if data, err := os.ReadFile(second); err != nil || string(data) != "three\n" {
		t.Fatalf("%s: %q, %v", second, data, err)
	}
	if st, err := os.Stat(filepath.Dir(second)); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("the new directory: %v, %v; want mode 0700", st, err)
	}
}
