//go:build linux

package proc

import (
	"errors"
	"io/fs"
	"os/exec"
	"slices"
	"syscall"
	"testing"
)

func TestChildren(t *testing.T) {
	parent := exec.Command("sh", "-c", "sleep 100 & sleep 100 & echo; wait")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	parent.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-parent.Process.Pid, syscall.SIGKILL)
		parent.Wait()
	})
	if _, err := out.Read(make([]byte, 1)); err != nil { // both started
		t.Fatal(err)
	}
	kids, err := Children(parent.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if len(kids) != 2 {
		t.Fatalf("children %v, want the two sleeps", kids)
	}
	for _, pid := range kids {
		st, err := ReadStat(pid)
		if err != nil || st.PPID != parent.Process.Pid {
			t.Errorf("child %d: %+v, %v", pid, st, err)
		}
	}
}

func TestChildrenOfMissingProcess(t *testing.T) {
	if _, err := Children(1 << 30); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Children of a missing pid: %v, want fs.ErrNotExist", err)
	}
}

func TestParsePIDList(t *testing.T) {
	for in, want := range map[string][]int{
		"":            nil,
		"12 345 ":     {12, 345},
		"7\n":         {7},
		"x 0 -3 9 08": {9},
	} {
		if got := parsePIDList(in); !slices.Equal(got, want) {
			t.Errorf("parsePIDList(%q) = %v, want %v", in, got, want)
		}
	}
}
