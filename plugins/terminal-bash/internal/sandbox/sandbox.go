//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/dshdev/dsh/plugins/terminal/termapi"

	"golang.org/x/sys/unix"
)

// Policy is what a confined shell may do.
type Policy struct {
	Mode termapi.SandboxMode `json:"mode"`
	// Network false puts the shell in a network namespace of its own,
	// where only a loopback interface exists.
	Network bool `json:"network"`
	// WritableDirs are the directories a termapi.SandboxWorkspaceWrite shell may write
	// below (create, change, remove, rename within).
	WritableDirs []string `json:"writableDirs,omitempty"`
	// WritableFiles are files a shell may write in any confined mode: the
	// shell protocol's status FIFO.
	WritableFiles []string `json:"writableFiles,omitempty"`
	// Private is dsh's private directory (tokens, every session's control
	// files and saved outputs). A shell confined to a mode that restricts
	// files sees an empty directory there, but for Keep.
	Private string `json:"private,omitempty"`
	// Keep are the directories below Private that belong to this session
	// (its control directory, its owner's saved outputs): they stay
	// visible, read-only but for WritableDirs and WritableFiles among them.
	Keep []string `json:"keep,omitempty"`
	// TerminalFD, when not 0, is the descriptor of a unix socket on which
	// the helper hands over the shell's terminal (see Handover); the
	// terminal is made in the shell's own devpts instance.
	TerminalFD int `json:"terminalFD,omitempty"`
}

// Confined reports whether the policy restricts anything at all.
func (p Policy) Confined() bool { return p.restrictsFiles() || !p.Network }

func (p Policy) restrictsFiles() bool {
	return p.Mode == termapi.SandboxWorkspaceWrite || p.Mode == termapi.SandboxReadOnly
}

// OwnTerminal reports whether a shell under p gets its terminal from the
// helper (see WrapTerminal) instead of from its parent: a shell confined
// to a mode that restricts files sees only its own devpts instance, in
// which no terminal of the parent's exists.
func (p Policy) OwnTerminal() bool { return p.restrictsFiles() }

// HelperName is argv[0] of this executable started as the sandbox helper.
// It is not a path, so no other program is started under it by accident.
const HelperName = "dsh-sandbox-helper"

// MinABI is the oldest Landlock ABI that confines writes completely: ABI 3
// (Linux 6.2) added truncation, without which truncate(1) could empty any
// file the user owns.
const MinABI = 3

// ErrUnenforceable is returned by Check when this machine cannot enforce a
// policy.
var ErrUnenforceable = errors.New("the sandbox cannot be enforced here")

// self is the executable the helper runs as. /proc/self/exe names this
// very binary even when its file has since been replaced or removed.
const self = "/proc/self/exe"

// Wrap makes cmd start through the helper, which confines itself under p
// and then executes what cmd names, with cmd's arguments, environment,
// directory and descriptors. cmd must not have been started. A policy
// that confines nothing leaves cmd alone.
func Wrap(cmd *exec.Cmd, p Policy) error {
	if !p.Confined() {
		return nil
	}
	enc, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("sandbox: encode policy: %w", err)
	}
	args := append([]string{HelperName, string(enc), cmd.Path}, cmd.Args...)
	cmd.Path, cmd.Args = self, args
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	namespaces(cmd.SysProcAttr, p)
	return nil
}

// namespaces adds the namespaces p needs to attr. A confined shell gets a
// user namespace, in which dsh's uid and gid map to themselves: whatever
// capabilities dsh has (root's, say) count only inside it, and the helper
// drops even those before it executes the shell, so the shell cannot load
// a kernel module, join another namespace or remount what the sandbox
// set up. Without the network it gets a network namespace too, owned by
// that user namespace, so even a root shell cannot setns(2) its way back
// to dsh's network. A mode that restricts files adds a mount namespace,
// in which the helper makes every mount read-only and binds the writable
// paths back; the helper keeps CAP_SYS_ADMIN (inside the namespace)
// across its own execve for that, as an ambient capability.
func namespaces(attr *syscall.SysProcAttr, p Policy) {
	uid, gid := os.Getuid(), os.Getgid()
	attr.Cloneflags |= unix.CLONE_NEWUSER
	attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
	attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	attr.GidMappingsEnableSetgroups = false
	if !p.Network {
		attr.Cloneflags |= unix.CLONE_NEWNET
	}
	if p.restrictsFiles() {
		attr.Cloneflags |= unix.CLONE_NEWNS
		attr.AmbientCaps = append(attr.AmbientCaps, unix.CAP_SYS_ADMIN)
	}
}

// Report is what Check learnt of the machine.
type Report struct {
	// ABI is the Landlock ABI the kernel offers; 0 when the policy does
	// not need Landlock and it was not looked at.
	ABI int
}

// Check starts the helper with p's namespaces and has it confine itself
// under p, without a shell. The error wraps ErrUnenforceable and says what
// is missing when the machine cannot enforce p.
func Check(ctx context.Context, p Policy) (Report, error) {
	if !p.Confined() {
		return Report{}, nil
	}
	cmd := exec.CommandContext(ctx, self)
	if err := Wrap(cmd, p); err != nil {
		return Report{}, err
	}
	// A probe is the helper without a program to execute.
	cmd.Args = cmd.Args[:2]
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		why := strings.TrimSpace(stderr.String())
		if why == "" {
			why = err.Error()
			if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EUSERS) {
				why = "the kernel refused a user namespace" + netNote(p) + " (" + err.Error() + "); check user.max_user_namespaces and kernel.unprivileged_userns_clone"
			}
		}
		return Report{}, fmt.Errorf("%w: %s", ErrUnenforceable, strings.TrimPrefix(why, helperPrefix))
	}
	var r Report
	if v, ok := strings.CutPrefix(strings.TrimSpace(stdout.String()), "landlock-abi="); ok {
		r.ABI, _ = strconv.Atoi(v)
	}
	return r, nil
}

func netNote(p Policy) string {
	if p.Network {
		return ""
	}
	return " or network namespace"
}
