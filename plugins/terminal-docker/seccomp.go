//go:build linux

package terminaldocker

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// The container's workspace is the host's project. Without CAP_MKNOD,
// CAP_CHOWN and CAP_SETFCAP a shell makes no device node, no file of
// another user and no file capability there, but it still owns what it
// writes, and an owner may make its file setuid: with dsh running as root
// the container runs as root, and a setuid-root copy of bash left in the
// project gives root to whoever runs it on the host. nosuid on the
// container's mount does not help the host's view of the directory, so
// the default seccomp profile refuses the bits themselves: Docker's own
// default profile, with chmod, fchmod, fchmodat, fchmodat2 and the calls
// that create a file (open, openat, creat, mknod, mknodat) allowed only
// for modes without S_ISUID and S_ISGID, and openat2, whose mode lies in
// memory a filter cannot read, refused with ENOSYS (callers fall back to
// openat).

// suidBits are the mode bits that make a program run as its owner or group.
const suidBits = unix.S_ISUID | unix.S_ISGID

// modeArgs is the argument that holds the mode, per guarded system call.
var modeArgs = map[string]uint{
	"chmod": 1, "fchmod": 1, "fchmodat": 2, "fchmodat2": 2,
	"open": 2, "openat": 3, "creat": 1, "mknod": 1, "mknodat": 2,
}

// Values of Config.Seccomp besides a profile's path.
const (
	seccompDSH           = ""               // the profile above
	seccompDockerDefault = "docker-default" // the daemon's own default
	seccompUnconfined    = "unconfined"     // no filter at all
)

// defaultProfile is the profile above, as JSON for the daemon.
func defaultProfile() ([]byte, error) {
	p := seccomp.DefaultProfile()
	for _, sc := range p.Syscalls {
		if sc.Action != specs.ActAllow || len(sc.Args) > 0 {
			continue
		}
		sc.Names = slices.DeleteFunc(sc.Names, func(n string) bool {
			_, guarded := modeArgs[n]
			return guarded || n == "openat2"
		})
	}
	names := make([]string, 0, len(modeArgs))
	for n := range modeArgs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		p.Syscalls = append(p.Syscalls, &seccomp.Syscall{
			LinuxSyscall: specs.LinuxSyscall{
				Names:  []string{n},
				Action: specs.ActAllow,
				// (mode & suidBits) == 0; anything else meets the
				// profile's default action, EPERM.
				Args: []specs.LinuxSeccompArg{{Index: modeArgs[n], Value: suidBits, ValueTwo: 0, Op: specs.OpMaskedEqual}},
			},
			Comment: "dsh: no setuid or setgid file in the host's project",
		})
	}
	enosys := uint(unix.ENOSYS)
	p.Syscalls = append(p.Syscalls, &seccomp.Syscall{
		LinuxSyscall: specs.LinuxSyscall{Names: []string{"openat2"}, Action: specs.ActErrno, ErrnoRet: &enosys},
		Comment:      "dsh: its mode is out of a filter's reach; callers fall back to openat",
	})
	return json.Marshal(p)
}

// securityOpts are the created container's security options for cfg.
func securityOpts(cfg *Config) ([]string, error) {
	var opts []string
	if !cfg.NewPrivileges {
		opts = append(opts, "no-new-privileges")
	}
	switch cfg.Seccomp {
	case seccompDockerDefault:
	case seccompUnconfined:
		opts = append(opts, "seccomp=unconfined")
	case seccompDSH:
		profile, err := defaultProfile()
		if err != nil {
			return nil, fmt.Errorf("terminal-docker: the seccomp profile: %w", err)
		}
		opts = append(opts, "seccomp="+string(profile))
	default:
		profile, err := os.ReadFile(cfg.Seccomp)
		if err != nil {
			return nil, fmt.Errorf("terminal-docker: seccomp: %w", err)
		}
		if !json.Valid(profile) {
			return nil, fmt.Errorf("terminal-docker: seccomp: %s is not JSON", cfg.Seccomp)
		}
		opts = append(opts, "seccomp="+string(profile))
	}
	return opts, nil
}
