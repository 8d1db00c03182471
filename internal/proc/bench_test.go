//go:build linux

package proc

import (
	"testing"
)

func BenchmarkScan(b *testing.B) {
	var s *Snapshot
	for b.Loop() {
		var err error
		if s, err = Scan(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(s.Len()), "procs")
}

func BenchmarkTrackerRefresh(b *testing.B) {
	sh := startShell(b, nil)
	sh.run(`sleep 1000 & sleep 1000 & (sleep 1000 &); echo "JOB=$!"`)
	sh.expectPID("JOB")
	tr := NewTracker(sh.id)
	for b.Loop() {
		s, err := Scan()
		if err != nil {
			b.Fatal(err)
		}
		tr.Refresh(s)
	}
}

// BenchmarkWaitingOnTerminal measures one probe, as the session makes it
// on each readiness poll.
func BenchmarkWaitingOnTerminal(b *testing.B) {
	for _, bb := range []struct {
		name string
		cmd  string
		want bool
	}{
		// The leader proves it: no /proc walk.
		{"cat (read, leader)", `cat`, true},
		{"bash prompt (pselect6, reads memory)", ``, true},
		{"python3 -i (pselect6, readline)", `python3 -i`, true},
		// No proof: the leader, then a walk of /proc for other members.
		{"sleep|cat (miss, walks /proc)", `sleep 1000 | cat`, false},
	} {
		b.Run(bb.name, func(b *testing.B) {
			requireArch(b)
			sh := startShell(b, nil)
			pgid := sh.id.PID
			if bb.cmd != "" {
				sh.run(bb.cmd)
				pgid = sh.waitForegroundJob()
			}
			eventually(b, "the state to measure", func() bool {
				ok, err := WaitingOnTerminal(pgid, sh.tty)
				return err == nil && ok == bb.want && groupSettled(b, pgid)
			})
			b.Run("walk", func(b *testing.B) {
				for b.Loop() {
					if ok, err := WaitingOnTerminal(pgid, sh.tty); err != nil || ok != bb.want {
						b.Fatalf("WaitingOnTerminal = %v, %v; want %v", ok, err, bb.want)
					}
				}
			})
			// What a poll that has just taken a Snapshot pays on top.
			b.Run("snapshot", func(b *testing.B) {
				s := scan(b)
				for b.Loop() {
					if ok := s.WaitingOnTerminal(pgid, sh.tty); ok != bb.want {
						b.Fatalf("Snapshot.WaitingOnTerminal = %v; want %v", ok, bb.want)
					}
				}
			})
		})
	}
}

// groupSettled: every member of the group is blocked in a system call,
// so a miss measured is a real miss, not a process still starting.
func groupSettled(b *testing.B, pgid int) bool {
	for _, st := range scan(b).Group(pgid) {
		if _, _, ok := mainSyscall(st.PID); !ok {
			return false
		}
	}
	return true
}

// BenchmarkNow is the mark every command takes at its start.
func BenchmarkNow(b *testing.B) {
	for b.Loop() {
		Now()
	}
}
