//go:build linux

package terminalbash

import (
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// jobIgnores reports the signals of sigs that a job of s starts with
// ignored.
func jobIgnores(t *testing.T, s *session, sigs []unix.Signal) []unix.Signal {
	t.Helper()
	out, _ := mustExec(t, s, "grep SigIgn /proc/self/status")
	mask, ok := parseSigIgn([]byte(out))
	if !ok {
		t.Fatalf("job's status %q has no SigIgn", out)
	}
	var ignored []unix.Signal
	for _, sig := range sigs {
		if mask&(1<<(uint(sig)-1)) != 0 {
			ignored = append(ignored, sig)
		}
	}
	return ignored
}

// TestJobsStartWithDefaultSignals: a host that ignores job-control signals
// must not pass that on. A signal ignored when bash starts stays ignored in
// every job it runs, and no trap can undo it: ^C would stop nothing, a
// closed terminal would hang up nothing.
func TestJobsStartWithDefaultSignals(t *testing.T) {
	sigs := []unix.Signal{unix.SIGHUP, unix.SIGINT, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU}
	for _, sig := range sigs {
		signal.Ignore(sig)
	}
	t.Cleanup(func() {
		for _, sig := range sigs {
			signal.Reset(sig)
		}
	})
	s := spawn(t, newTestBackend(t, nil), "")
	if got := jobIgnores(t, s, sigs); len(got) > 0 {
		t.Errorf("a job starts with %v ignored", got)
	}
}

// signalsHelper marks the run of this test binary that
// TestSignalsIgnoredAtHostStart starts with signals ignored.
const signalsHelper = "DSH_TEST_SIGNALS_HELPER"

// TestSignalsIgnoredAtHostStart: a host started by nohup, or as a
// background job of a script, begins with SIGHUP or SIGINT ignored. Once
// it has handled one for a while and stopped (as the REPL does with ^C),
// the runtime puts SIG_IGN back without signal.Ignored knowing; the shell
// must still start with the signal at its default.
func TestSignalsIgnoredAtHostStart(t *testing.T) {
	sigs := []unix.Signal{unix.SIGHUP, unix.SIGINT}
	if os.Getenv(signalsHelper) != "" {
		c := make(chan os.Signal, 1)
		for _, sig := range sigs {
			signal.Notify(c, sig)
		}
		signal.Stop(c)
		mask, ok := ignoredMask()
		for _, sig := range sigs {
			if !ok || mask&(1<<(uint(sig)-1)) == 0 {
				t.Fatalf("the premise fails: %v is not ignored (SigIgn %016x)", sig, mask)
			}
		}
		s := spawn(t, newTestBackend(t, nil), "")
		if got := jobIgnores(t, s, sigs); len(got) > 0 {
			t.Errorf("a job starts with %v ignored", got)
		}
		return
	}
	for _, sig := range sigs {
		signal.Ignore(sig)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSignalsIgnoredAtHostStart$", "-test.v")
	cmd.Env = append(os.Environ(), signalsHelper+"=1")
	out, err := cmd.CombinedOutput()
	for _, sig := range sigs {
		signal.Reset(sig)
	}
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("host started with %v ignored: %v\n%s", sigs, err, out)
	}
}

func TestParseSigIgn(t *testing.T) {
	tests := []struct {
		status string
		want   uint64
		ok     bool
	}{
		{"Name:\tbash\nSigBlk:\t0000000000010000\nSigIgn:\t0000000000380004\nSigCgt:\t000000004b813efb\n", 0x380004, true},
		{"SigIgn:\t0000000000000000\n", 0, true},
		{"Name:\tbash\n", 0, false},
		{"SigIgn:\tzz\n", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseSigIgn([]byte(tt.status))
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseSigIgn(%q) = %x, %v; want %x, %v", tt.status, got, ok, tt.want, tt.ok)
		}
	}
}
