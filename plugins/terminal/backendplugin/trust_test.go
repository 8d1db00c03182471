package backendplugin_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/dshdev/dsh/host"
	bashtool "github.com/dshdev/dsh/plugins/tool-bash-persistent"
)

// TestPluginAnotherUserCouldReplaceIsRefused: as sshd's StrictModes, a
// plugin executable that another user could replace (it, or a directory
// above it, belongs to another user or is writable by group or others) is
// refused at load (host.CheckTrust); a world-writable directory with the
// sticky bit (/tmp) above a private one is not such a place, and a link is
// judged, and run, by what it points to (issue 26, item 11).
func TestPluginAnotherUserCouldReplaceIsRefused(t *testing.T) {
	entry := "- id: remote\n  name: ./backend\n"
	for _, tt := range []struct {
		name  string
		root  bool // needs root (chown)
		setup func(t *testing.T, dir string)
		want  string // "" loads
	}{
		{"a private directory", false, func(*testing.T, string) {}, ""},
		{"an executable writable by its group", false, func(t *testing.T, dir string) {
			chmod(t, filepath.Join(dir, "backend"), 0o775)
		}, "backend may be written by other users (mode 0775)"},
		{"a directory writable by everyone", false, func(t *testing.T, dir string) {
			inSubdir(t, dir)
			chmod(t, filepath.Join(dir, "sub"), 0o777)
		}, "sub may be written by other users (mode 0777)"},
		{"a sticky directory above a private one", false, func(t *testing.T, dir string) {
			sticky := filepath.Join(dir, "shared")
			private := filepath.Join(sticky, "mine")
			mkdir(t, sticky, 0o777|os.ModeSticky)
			mkdir(t, private, 0o700)
			rename(t, filepath.Join(dir, "backend"), filepath.Join(private, "backend"))
			symlink(t, filepath.Join(private, "backend"), filepath.Join(dir, "backend"))
		}, ""},
		{"a symlink to an executable in an open directory", false, func(t *testing.T, dir string) {
			open := filepath.Join(dir, "open")
			mkdir(t, open, 0o777)
			rename(t, filepath.Join(dir, "backend"), filepath.Join(open, "backend"))
			symlink(t, filepath.Join(open, "backend"), filepath.Join(dir, "backend"))
		}, "open may be written by other users (mode 0777)"},
		{"an executable of another user", true, func(t *testing.T, dir string) {
			chown(t, filepath.Join(dir, "backend"), 65534)
		}, "backend belongs to uid 65534, neither this user nor root"},
		{"a directory of another user", true, func(t *testing.T, dir string) {
			inSubdir(t, dir)
			chown(t, filepath.Join(dir, "sub"), 65534)
		}, "sub belongs to uid 65534, neither this user nor root"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root && os.Getuid() != 0 {
				t.Skip("needs root to give a file to another user")
			}
			d := deployment(t, "bash", entry)
			tt.setup(t, filepath.Dir(d.File))
			h, err := host.Load(context.Background(), d)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("load: %v", err)
				}
				h.Close(context.Background())
				return
			}
			if err == nil {
				h.Close(context.Background())
				t.Fatal("the deployment loaded")
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), `entry "remote"`) || !errors.Is(err, host.ErrUntrusted) {
				t.Fatalf("error %q, want it to say %q", err, tt.want)
			}
		})
	}
}

// TestPluginRunsWhatWasChecked: an entry that names its executable through
// a link runs the file the link pointed to when the deployment was checked,
// also when the plugin is started again: a link that someone changes later
// (here in a directory anyone may write) changes nothing (issue 26, item
// 11).
func TestPluginRunsWhatWasChecked(t *testing.T) {
	d := deployment(t, "bash", "- id: remote\n  name: ./open/backend\n")
	dir := filepath.Dir(d.File)
	open := filepath.Join(dir, "open")
	mkdir(t, open, 0o777)
	symlink(t, filepath.Join(dir, "backend"), filepath.Join(open, "backend"))
	ctx := context.Background()
	h, err := host.Load(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	o, err := h.NewOwner("agent", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close(ctx)
	call := func(command string) string {
		args, _ := json.Marshal(bashtool.Args{Command: command})
		return h.Tools().Call(ctx, o, bashtool.ToolName, args).Text
	}
	plugin, err := strconv.Atoi(strings.TrimSpace(call("echo $PPID")))
	if err != nil {
		t.Fatal(err)
	}
	// Another user points the link elsewhere, and the plugin dies.
	if err := os.Remove(filepath.Join(open, "backend")); err != nil {
		t.Fatal(err)
	}
	symlink(t, pluginScript(t, "crash"), filepath.Join(open, "backend"))
	if err := syscall.Kill(plugin, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	call("true") // reports the shell's end
	if got := call("echo again"); got != "again" {
		t.Fatalf("the plugin started again ran what the link points to now: %q", got)
	}
}

// TestPluginEnvironment: a backend plugin gets dsh's environment without
// what looks like a credential, unless its entry passes the name with
// passEnv, which goes to dsh, not to the plugin (issue 26, item 11).
func TestPluginEnvironment(t *testing.T) {
	t.Setenv("PLUGINTEST_API_TOKEN", "s3cret")
	t.Setenv("PLUGINTEST_PLAIN", "plain")
	for _, tt := range []struct {
		name, config, want string
	}{
		{"default", "{env: {defaultExcludes: false}}", "unset plain"},
		{"passed", "{env: {defaultExcludes: false}, passEnv: [plugintest_api_*]}", "s3cret plain"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// The plugin's shells get what the plugin got: its own
			// policy here drops nothing.
			d := deployment(t, "bash", "- id: remote\n  name: ./backend\n  config: "+tt.config+"\n")
			ctx := context.Background()
			h, err := host.Load(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close(ctx)
			o, err := h.NewOwner("agent", t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer o.Close(ctx)
			args, _ := json.Marshal(bashtool.Args{Command: `echo "${PLUGINTEST_API_TOKEN-unset} $PLUGINTEST_PLAIN"`})
			if got := h.Tools().Call(ctx, o, bashtool.ToolName, args).Text; got != tt.want {
				t.Fatalf("the plugin's shell sees %q, want %q", got, tt.want)
			}
		})
	}
	d := deployment(t, "bash", "- id: remote\n  name: ./backend\n  config: {passEnv: [\"[\"]}\n")
	if h, err := host.Load(context.Background(), d); err == nil {
		h.Close(context.Background())
		t.Fatal("a malformed passEnv glob loaded")
	} else if !strings.Contains(err.Error(), "passEnv") {
		t.Fatalf("a malformed passEnv glob: %v", err)
	}
}

// inSubdir moves the backend into dir/sub, and leaves a link to it in its
// place, in dir (which stays private).
func inSubdir(t *testing.T, dir string) {
	t.Helper()
	mkdir(t, filepath.Join(dir, "sub"), 0o700)
	rename(t, filepath.Join(dir, "backend"), filepath.Join(dir, "sub", "backend"))
	symlink(t, filepath.Join(dir, "sub", "backend"), filepath.Join(dir, "backend"))
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func chown(t *testing.T, path string, uid int) {
	t.Helper()
	if err := os.Lchown(path, uid, -1); err != nil {
		t.Fatal(err)
	}
	// Back to us at the end, so that t.TempDir can remove it.
	t.Cleanup(func() { os.Lchown(path, os.Getuid(), -1) })
}

func mkdir(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	chmod(t, path, mode)
}

func rename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
