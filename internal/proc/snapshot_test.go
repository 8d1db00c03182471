//go:build linux

package proc

import (
	"bufio"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func pidsOf(stats []Stat) []int {
	out := make([]int, len(stats))
	for i, st := range stats {
		out[i] = st.PID
	}
	return out
}

func TestSnapshotSynthetic(t *testing.T) {
	s := newSnapshot([]Stat{
		{PID: 13, PPID: 12, Session: 10},
		{PID: 10, PPID: 1, Session: 10},
		{PID: 12, PPID: 10, Session: 10},
		{PID: 11, PPID: 10, Session: 30, PGRP: 11},
		{PID: 30, PPID: 1, Session: 30, PGRP: 11},
		// A reparenting race seen as a cycle.
		{PID: 20, PPID: 21},
		{PID: 21, PPID: 20},
	})
	for _, tt := range []struct {
		name string
		got  []Stat
		want []int
	}{
		{"descendants children first", s.Descendants(10), []int{11, 13, 12}},
		{"descendants of a leaf", s.Descendants(13), nil},
		{"descendants of a missing root", s.Descendants(99), nil},
		{"descendants through a cycle", s.Descendants(20), []int{21}},
		{"session", s.Session(10), []int{10, 12, 13}},
		{"session of another", s.Session(30), []int{11, 30}},
		{"group", s.Group(11), []int{11, 30}},
		{"missing group", s.Group(99), nil},
	} {
		if got := pidsOf(tt.got); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	if st, ok := s.Get(12); !ok || st.PPID != 10 {
		t.Errorf("Get(12) = %+v, %v", st, ok)
	}
	if _, ok := s.Get(99); ok {
		t.Error("Get(99) found a process that is not there")
	}
}

// TestSnapshotRealTree builds root → {sleep A, bash C → sleep B} in a new
// session and reads it back.
func TestSnapshotRealTree(t *testing.T) {
	cmd := exec.Command("bash", "-c", `sleep 1000 & echo A=$!; bash -c 'sleep 1000 & echo B=$!; wait' & echo C=$!; wait`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	root := cmd.Process.Pid
	pids := map[string]int{}
	t.Cleanup(func() {
		for _, pid := range append([]int{root}, pids["A"], pids["B"], pids["C"]) {
			if id, err := IdentityOf(pid); err == nil && pid > 0 {
				id.Signal(unix.SIGKILL)
			}
		}
		cmd.Wait()
	})
	lines := bufio.NewScanner(stdout)
	for len(pids) < 3 && lines.Scan() {
		name, pid, _ := strings.Cut(lines.Text(), "=")
		pids[name], _ = strconv.Atoi(pid)
	}
	if len(pids) < 3 {
		t.Fatalf("the tree did not report its pids: %v", pids)
	}
	// B's pid is printed by B's parent right after forking it, and it may
	// not have become "sleep" yet: that does not matter for the tree.
	s, err := Scan()
	if err != nil {
		t.Fatal(err)
	}
	desc := pidsOf(s.Descendants(root))
	if got, want := slices.Sorted(slices.Values(desc)), slices.Sorted(slices.Values([]int{pids["A"], pids["B"], pids["C"]})); !slices.Equal(got, want) {
		t.Fatalf("descendants of %d = %v, want %v", root, desc, want)
	}
	if slices.Index(desc, pids["B"]) > slices.Index(desc, pids["C"]) {
		t.Errorf("descendants %v list C=%d before its child B=%d", desc, pids["C"], pids["B"])
	}
	session := pidsOf(s.Session(root))
	if want := slices.Sorted(slices.Values([]int{root, pids["A"], pids["B"], pids["C"]})); !slices.Equal(session, want) {
		t.Errorf("session %d = %v, want %v", root, session, want)
	}
	if group := pidsOf(s.Group(root)); !slices.Equal(group, session) {
		t.Errorf("group %d = %v, want %v (no job control: one group)", root, group, session)
	}
	if st, ok := s.Get(os.Getpid()); !ok || st.PPID != os.Getppid() {
		t.Errorf("the snapshot does not hold this process: %+v", st)
	}
}
