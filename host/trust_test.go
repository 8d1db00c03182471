package host

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckTrust: a deployment file or plugin executable that a confined
// shell could rewrite (below what the deployment makes writable to it),
// or that another user could, is refused by name (issue 25, item 5).
func TestCheckTrust(t *testing.T) {
	root := t.TempDir()
	project := filepath.Join(root, "project")
	cache := filepath.Join(root, "cache")
	outside := filepath.Join(root, "outside")
	shared := filepath.Join(root, "shared")
	for _, d := range []string{project, cache, outside, shared, filepath.Join(project, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	write := func(path string, mode os.FileMode) string {
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	inProject := write(filepath.Join(project, "deploy.yaml"), 0o644)
	inCache := write(filepath.Join(cache, "deploy.yaml"), 0o644)
	clean := write(filepath.Join(outside, "deploy.yaml"), 0o644)
	openFile := write(filepath.Join(outside, "open.yaml"), 0o666)
	inShared := write(filepath.Join(shared, "deploy.yaml"), 0o644)
	exeInProject := write(filepath.Join(project, "bin", "backend"), 0o755)
	exeOutside := write(filepath.Join(outside, "backend"), 0o755)
	// A link outside that points into the project is the project's file.
	link := filepath.Join(outside, "link.yaml")
	if err := os.Symlink(inProject, link); err != nil {
		t.Fatal(err)
	}

	reg := NewRegistry()
	reg.Register(Plugin{
		Name:   "confining",
		Config: func() any { return new(struct{}) },
		Apply:  func(*Context, any) (any, error) { return nil, nil },
		ShellWritable: func(_ any, workdir string) []string {
			return []string{workdir, cache}
		},
	})
	reg.RegisterExternal(func(name, path string) (Plugin, error) {
		return Plugin{Name: name, Apply: func(*Context, any) (any, error) { return nil, nil }}, nil
	})
	plan := func(t *testing.T, entries string) *Plan {
		t.Helper()
		d, err := ParseDeployment("deploy.yaml", []byte(entries), nil)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Resolve(d, reg)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	confining := "- id: c\n  name: confining\n"
	for _, tt := range []struct {
		name, entries, file, want string
	}{
		{"outside", confining, clean, ""},
		{"no file", confining, "", ""},
		{"in the workspace", confining, inProject, "the deployment file " + inProject + " lies below " + project + `, which entry "c" lets its shells write`},
		{"in a writable directory", confining, inCache, "lies below " + cache},
		{"through a symlink", confining, link, "lies below " + project},
		{"writable by others", confining, openFile, openFile + " may be written by other users (mode 0666)"},
		{"in a directory others write", confining, inShared, shared + " may be written by other users (mode 0777)"},
		{"an executable in the workspace", confining + "- id: ext\n  name: " + exeInProject + "\n", clean, `the executable of entry "ext" ` + exeInProject + " lies below " + project},
		{"an executable outside", confining + "- id: ext\n  name: " + exeOutside + "\n", clean, ""},
		{"nothing confined", "- id: ext\n  name: " + exeInProject + "\n", inProject, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckTrust(plan(t, tt.entries), tt.file, project)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("CheckTrust = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("CheckTrust = %v, want ErrUntrusted saying %q", err, tt.want)
			}
		})
	}
}
