package host

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExternalEntries: an entry whose name is a path goes to the external
// loader, with the path resolved against the deployment file's directory.
func TestExternalEntries(t *testing.T) {
	dir := t.TempDir()
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, entry, file string
		wantPath          string
		wantErr           string
	}{
		{name: "relative to the file", entry: "./bin/backend", file: filepath.Join(dir, "deploy.yaml"), wantPath: filepath.Join(dir, "bin/backend")},
		{name: "parent directory", entry: "../backend", file: filepath.Join(dir, "d", "deploy.yaml"), wantPath: filepath.Join(dir, "backend")},
		{name: "absolute", entry: "/opt/backend", file: filepath.Join(dir, "deploy.yaml"), wantPath: "/opt/backend"},
		{name: "not a file", entry: "./backend", wantPath: filepath.Join(cwd, "backend")},
		{name: "relative file", entry: "./backend", file: "deploy.yaml", wantPath: filepath.Join(cwd, "backend")},
		{name: "refused", entry: "./refused", file: filepath.Join(dir, "deploy.yaml"), wantErr: "cannot load " + filepath.Join(dir, "refused")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := NewRegistry()
			var gotName, gotPath string
			reg.RegisterExternal(func(name, path string) (Plugin, error) {
				gotName, gotPath = name, path
				if strings.HasSuffix(path, "refused") {
					return Plugin{}, errors.New("cannot load " + path)
				}
				return Plugin{Name: name, Apply: func(*Context, any) (any, error) { return nil, nil }}, nil
			})
			d, err := ParseDeployment("deploy.yaml", []byte("- id: ext\n  name: "+tt.entry+"\n"), nil)
			if err != nil {
				t.Fatal(err)
			}
			d.File = tt.file
			plan, err := Resolve(d, reg)
			if tt.wantErr != "" {
				var de *DeploymentError
				if !errors.As(err, &de) || de.Entry != "ext" || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrUnknownPlugin) {
					t.Fatalf("Resolve = %v, want a DeploymentError of entry ext saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if gotName != tt.entry || gotPath != tt.wantPath {
				t.Errorf("loader got (%q, %q), want (%q, %q)", gotName, gotPath, tt.entry, tt.wantPath)
			}
			if len(plan.Steps) != 1 || plan.Steps[0].Plugin.Name != tt.entry {
				t.Errorf("plan %+v", plan.Steps)
			}
		})
	}
}

func TestExternalEntryWithoutLoader(t *testing.T) {
	d, err := ParseDeployment("deploy.yaml", []byte("- id: ext\n  name: ./backend\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Resolve(d, NewRegistry())
	if !errors.Is(err, ErrUnknownPlugin) || !strings.Contains(err.Error(), "loads no executables") {
		t.Fatalf("Resolve = %v, want ErrUnknownPlugin saying it loads no executables", err)
	}
}

func TestRegisterRefusesSlash(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("a plugin name with a slash was registered")
		}
	}()
	NewRegistry().Register(Plugin{Name: "a/b", Apply: func(*Context, any) (any, error) { return nil, nil }})
}
