//go:build linux

package terminalbash

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dshdev/dsh/config"
	"github.com/dshdev/dsh/internal/private"
	"github.com/dshdev/dsh/plugins/terminal-bash/internal/sandbox"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// SandboxConfig confines every shell of the backend with the kernel
// (Landlock, user and network namespaces), never with path checks: what a
// shell may not do, no program it starts may do either. A setting this
// machine cannot enforce fails the plugin's load, naming what is missing.
type SandboxConfig struct {
	// Mode is what a shell may write. "danger-full-access": anything dsh's
	// user may (no sandbox). "workspace-write": read everything, write
	// only below the workspace, the session's private temporary directory
	// (TMPDIR) and the writable directories. "read-only": read
	// everything, write nothing but the terminal and /dev/null. Both
	// confined modes also refuse chmod, chown, touch and xattrs outside
	// the writable paths, setuid and setgid modes anywhere, new git hooks
	// and config in a writable repository, and hide dsh's private
	// directory and the user's other terminals. A confined shell runs in a
	// user namespace of its own, without any capability (even as root),
	// and cannot signal processes outside its session (Landlock ABI 6 and
	// later).
	Mode termapi.SandboxMode `json:"mode" jsonschema:"enum=danger-full-access,enum=workspace-write,enum=read-only"`
	// Network false gives each shell a network namespace of its own in
	// which only the loopback interface exists: nothing outside the
	// machine, nor any server of the machine's, can be reached; and no
	// unix socket can be made (socketpair still works), so neither can a
	// socket of the file system (docker.sock, ssh-agent).
	Network bool `json:"network"`
	// Workspace is the directory a workspace-write shell may write below.
	// Empty: the directory the session starts in (the spawn's working
	// directory, else dsh's).
	Workspace string `json:"workspace"`
	// Writable are more directories a workspace-write shell may write
	// below, such as /tmp or a build cache. Absolute paths that exist.
	Writable []string `json:"writable"`
}

// ErrSandboxUnenforceable is what a backend's load fails with when this
// machine cannot enforce its sandbox setting.
var ErrSandboxUnenforceable = sandbox.ErrUnenforceable

func defaultSandbox() SandboxConfig {
	return SandboxConfig{Mode: termapi.SandboxFullAccess, Network: true}
}

// validate reports the first invalid field; prefix is the field's name.
func (c *SandboxConfig) validate(prefix string) error {
	mode := c.Mode
	if !mode.Valid() {
		return config.FieldErrorf(prefix+".mode", "terminal-bash: %s.mode must be one of %s; got %q", prefix, modeList(), c.Mode)
	}
	if c.Workspace != "" {
		if err := absoluteDir(c.Workspace); err != nil {
			return config.FieldErrorf(prefix+".workspace", "terminal-bash: %s.workspace: %v", prefix, err)
		}
	}
	for _, dir := range c.Writable {
		if err := absoluteDir(dir); err != nil {
			return config.FieldErrorf(prefix+".writable", "terminal-bash: %s.writable: %v", prefix, err)
		}
	}
	if mode != termapi.SandboxWorkspaceWrite && (c.Workspace != "" || len(c.Writable) > 0) {
		return config.FieldErrorf(prefix+".mode", "terminal-bash: %s.workspace and %s.writable need mode %q; mode is %q", prefix, prefix, termapi.SandboxWorkspaceWrite, c.Mode)
	}
	return nil
}

func modeList() string {
	names := make([]string, len(termapi.SandboxModes))
	for i, m := range termapi.SandboxModes {
		names[i] = string(m)
	}
	return strings.Join(names, ", ")
}

// absoluteDir checks that dir is an absolute path naming a directory.
func absoluteDir(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("%q is not an absolute path", dir)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	return nil
}

// confined reports whether the sandbox restricts anything.
func (c *SandboxConfig) confined() bool {
	return c.Mode != termapi.SandboxFullAccess || !c.Network
}

// sandboxCheckBound bounds the probe at load: it forks one helper.
const sandboxCheckBound = 10 * time.Second

// checkSandbox has the kernel confine a probe as it would a shell, and
// returns the Landlock ABI it found, so that a mode this machine cannot
// enforce fails the load instead of the first shell.
func checkSandbox(c *SandboxConfig) (int, error) {
	if !c.confined() {
		return 0, nil
	}
	p := c.policy(os.TempDir(), "")
	if dir, err := private.Dir(); err == nil && p.OwnTerminal() {
		p.Private = dir // hidden as a shell's would be
	}
	ctx, cancel := context.WithTimeout(context.Background(), sandboxCheckBound)
	defer cancel()
	r, err := sandbox.Check(ctx, p)
	if err != nil {
		return 0, config.FieldErrorf("sandbox", "terminal-bash: sandbox mode %q with network %v: %w", c.Mode, c.Network, err)
	}
	return r.ABI, nil
}

// policy is what one shell may do: workspace is the session's starting
// directory, tmp its private temporary directory (empty when it has none).
func (c *SandboxConfig) policy(workspace, tmp string) sandbox.Policy {
	p := sandbox.Policy{Mode: c.Mode, Network: c.Network}
	if p.Mode == termapi.SandboxWorkspaceWrite {
		if c.Workspace != "" {
			workspace = c.Workspace
		}
		p.WritableDirs = append(p.WritableDirs, workspace)
		if tmp != "" {
			p.WritableDirs = append(p.WritableDirs, tmp)
		}
		p.WritableDirs = append(p.WritableDirs, c.Writable...)
	}
	return p
}

// WritableRoots are the host directories a shell of this sandbox may write
// below, when sessions start in workdir by default: none unless the mode
// is workspace-write (a shell with full access may write anything, and
// nothing is gained by naming it).
func (c *SandboxConfig) WritableRoots(workdir string) []string {
	if c.Mode != termapi.SandboxWorkspaceWrite {
		return nil
	}
	ws := c.Workspace
	if ws == "" {
		ws = workdir
	}
	return append([]string{ws}, c.Writable...)
}
