//go:build linux

package terminalbash

import (
	"bufio"
	"bytes"
	"os"
	"os/signal"
	"strconv"

	"golang.org/x/sys/unix"
)

// inheritedSignals are the signals a host can be started with ignored (by
// nohup, or as a background job of a script) that would reach the shell
// ignored. bash keeps a signal ignored at its start ignored in every job it
// runs, and no trap undoes that: ^C would interrupt nothing and a hangup
// would end nothing.
var inheritedSignals = []unix.Signal{
	unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGTERM,
	unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU,
}

// absorbed receives the signals the host ignored before unignoreSignals
// took them over. Nothing reads it: the signal package drops what does not
// fit, so the host goes on ignoring them.
var absorbed = make(chan os.Signal, 1)

// unignoreSignals makes every signal of inheritedSignals that the host
// ignores handled instead, by a handler that drops it. For the host nothing
// changes; a child starts with a handled signal at its default, which is
// how a shell must start. It runs before each shell starts, because a host
// may ignore a signal at any time.
//
// What counts is the kernel's disposition, not what the signal package
// remembers: signal.Reset of a signal that was ignored when the host
// started puts SIG_IGN back without signal.Ignored saying so.
func unignoreSignals() {
	mask, ok := ignoredMask()
	for _, sig := range inheritedSignals {
		if (ok && mask&(1<<(uint(sig)-1)) != 0) || signal.Ignored(sig) {
			signal.Notify(absorbed, sig)
		}
	}
}

// ignoredMask reads the host's set of ignored signals (SigIgn in
// /proc/self/status), bit n-1 for signal n.
func ignoredMask() (uint64, bool) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	return parseSigIgn(data)
}

// parseSigIgn finds the SigIgn line of a /proc/<pid>/status file.
func parseSigIgn(status []byte) (uint64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		hex, found := bytes.CutPrefix(sc.Bytes(), []byte("SigIgn:"))
		if !found {
			continue
		}
		mask, err := strconv.ParseUint(string(bytes.TrimSpace(hex)), 16, 64)
		return mask, err == nil
	}
	return 0, false
}
