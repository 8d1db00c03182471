//go:build linux

package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/dshdev/dsh/plugins/terminal/termapi"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsyscall "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// init turns this process into the helper when it was started as one: it
// confines itself and executes the shell, or exits. Nothing of the
// program's own main runs.
func init() {
	if len(os.Args) < 2 || os.Args[0] != HelperName {
		return
	}
	// The domain is the calling thread's, and execve keeps it: the
	// thread that confines itself is the one that executes, and it is
	// never handed back to the scheduler.
	runtime.LockOSThread()
	var p Policy
	err := json.Unmarshal([]byte(os.Args[1]), &p)
	if err != nil {
		err = fmt.Errorf("decode policy: %w", err)
	} else {
		err = helper(p, os.Args[2:])
	}
	if p.TerminalFD != 0 {
		reportFailure(p.TerminalFD, err)
	}
	fmt.Fprintf(os.Stderr, "%s%v\n", helperPrefix, err)
	os.Exit(exitHelperFailed)
}

// helperPrefix starts every message of the helper.
const helperPrefix = "dsh sandbox: "

// exitHelperFailed is the helper's status when it could not confine itself
// or execute the program, as a shell's is for a command it cannot run.
const exitHelperFailed = 126

// helper confines this thread under p and executes argv (a path, then the
// program's argv); with no argv it reports the Landlock ABI on stdout and
// exits 0. The order matters: mounts need the capabilities and no
// Landlock domain yet, the terminal needs the devpts instance, Landlock's
// rules name the files as mounted, and the filter comes last so that
// nothing the helper itself does is refused.
func helper(p Policy, argv []string) error {
	if len(argv) == 1 {
		return errors.New("no program to execute")
	}
	if !p.Network {
		if err := loopbackUp(); err != nil {
			return fmt.Errorf("bring up loopback in the shell's network namespace: %w", err)
		}
	}
	if p.restrictsFiles() {
		if err := isolateFiles(p); err != nil {
			return err
		}
		if p.TerminalFD != 0 {
			if err := makeTerminal(p.TerminalFD); err != nil {
				return err
			}
		}
	}
	// Landlock and the filter need no_new_privs; it also keeps a setuid
	// program from shedding either.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	abi := 0
	if p.restrictsFiles() {
		var err error
		if abi, err = confineFiles(p); err != nil {
			return err
		}
	}
	if err := installFilter(p); err != nil {
		return err
	}
	if err := dropCapabilities(); err != nil {
		return err
	}
	if len(argv) == 0 {
		fmt.Printf("landlock-abi=%d\n", abi)
		os.Exit(0)
	}
	if p.TerminalFD != 0 {
		if err := awaitRelease(p.TerminalFD); err != nil {
			return err
		}
	}
	err := unix.Exec(argv[0], argv[1:], os.Environ())
	return fmt.Errorf("cannot start %s: %w", argv[0], err)
}

// dropCapabilities clears every capability this thread has in its user
// namespace, and those an execve would grant a uid 0: a shell that kept
// CAP_SYS_ADMIN there could unmount what hides dsh's files and remount
// the rest writable.
func dropCapabilities() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear the ambient capabilities: %w", err)
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		// EINVAL: a capability this kernel does not know. EPERM: no
		// CAP_SETPCAP, which only a uid other than 0 lacks, and for it
		// execve grants nothing anyway.
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL && err != unix.EPERM {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var none [2]unix.CapUserData
	if err := unix.Capset(&hdr, &none[0]); err != nil {
		return fmt.Errorf("drop the capabilities: %w", err)
	}
	return nil
}

// confineFiles restricts this thread with Landlock: reading and executing
// everywhere, writing only where p says, plus the devices every shell
// writes to. It returns the kernel's ABI.
func confineFiles(p Policy) (int, error) {
	abi, err := llsyscall.LandlockGetABIVersion()
	switch {
	case err != nil:
		return 0, fmt.Errorf("no Landlock (%v): it needs Linux 5.13 or later with landlock in the lsm= boot parameter", err)
	case abi < MinABI:
		return abi, fmt.Errorf("the kernel's Landlock ABI %d is too old: confining writes needs ABI %d (Linux 6.2) or later", abi, MinABI)
	}
	rules := []landlock.Rule{
		landlock.RODirs("/"),
		// A shell writes to its terminal and to the null devices, and
		// programs set terminal modes with ioctls.
		landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx").WithIoctlDev().IgnoreIfMissing(),
		// The shell's own devpts instance (see privateDevpts), not dsh's.
		landlock.RWDirs("/dev/pts").WithIoctlDev().IgnoreIfMissing(),
	}
	if len(p.WritableFiles) > 0 {
		rules = append(rules, landlock.PathAccess(llsyscall.AccessFSWriteFile, p.WritableFiles...))
	}
	if p.Mode == termapi.SandboxWorkspaceWrite && len(p.WritableDirs) > 0 {
		rules = append(rules, landlock.RWDirs(p.WritableDirs...).WithRefer())
	}
	// Everything the newest known ABI can restrict, down to what this
	// kernel has; the network is left to the namespace.
	cfg := landlock.Config{HandledAccessFS: landlock.V11.HandledAccessFS, Scoped: landlock.V11.Scoped}.BestEffort()
	fd, flags, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return abi, fmt.Errorf("build the Landlock ruleset: %w", err)
	}
	defer unix.Close(fd)
	if err := llsyscall.LandlockRestrictSelf(fd, flags); err != nil {
		return abi, fmt.Errorf("enforce the Landlock ruleset: %w", err)
	}
	return abi, nil
}

// loopbackUp raises the lo interface of this process's network namespace:
// a fresh namespace has it down, and programs expect 127.0.0.1 to work.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
