//go:build linux

package terminalbash

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/dshdev/dsh/internal/cgtest"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// TestShellsAreTheOOMKillersFirstChoice: a shell, and what it starts, has
// the highest oom_score_adj; dsh's own is left as it was (issue 26, item 2).
func TestShellsAreTheOOMKillersFirstChoice(t *testing.T) {
	own, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		sc   *SandboxConfig
	}{
		{"unconfined", nil},
		{"sandboxed", &SandboxConfig{Mode: "read-only", Network: false}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var s *session
			if tt.sc != nil {
				s, _ = sandboxed(t, *tt.sc)
			} else {
				s = spawn(t, newTestBackend(t, nil), t.TempDir())
			}
			out, _ := mustExec(t, s, "cat /proc/$$/oom_score_adj /proc/self/oom_score_adj")
			if want := fmt.Sprintf("%d\n%d", shellOOMScoreAdj, shellOOMScoreAdj); strings.TrimSpace(out) != want {
				t.Fatalf("the shell's and its command's oom_score_adj: %q, want %q", out, want)
			}
		})
	}
	after, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(own) {
		t.Fatalf("dsh's own oom_score_adj changed from %q to %q", own, after)
	}
}

// oomHelperEnv makes the test binary act as a server holding a large heap
// (see TestOOMHelperProcess).
const oomHelperEnv = "DSH_TEST_OOM_HELPER"

// TestOOMKillsTheHogNotTheServer: a server of 192 MiB runs a command that
// would grow to 400 MiB, in a memory cgroup that bounds what they allocate
// from then on to 128 MiB. When the group runs out, the kernel's OOM
// killer picks among its processes by their size and their oom_score_adj
// (which adds up to the group's limit): it ends the command, though the
// server is the biggest process; the server carries on. (Were all of the
// server's memory in the group, as in production, it could never outweigh
// a hog with the highest score.)
func TestOOMKillsTheHogNotTheServer(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	g := cgtest.Memory(t, 128<<20)
	cmd := exec.Command(os.Args[0], "-test.run=^TestOOMHelperProcess$")
	cmd.Env = append(os.Environ(), oomHelperEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	br := bufio.NewReader(stdout)
	// The server grows before it joins the group (what it allocated is
	// charged where it was): only the shell's processes fill the group.
	if line, err := br.ReadString('\n'); line != "ready\n" {
		t.Fatalf("the server: %q, %v; it wrote:\n%s", line, err, out.String())
	}
	if err := g.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	io.WriteString(stdin, "go\n")
	stdin.Close()
	rest, _ := io.ReadAll(br)
	out.Write(rest)
	err = cmd.Wait()
	kills, kerr := g.OOMKills()
	if err != nil {
		t.Fatalf("the server process: %v (OOM kills in the group: %d %v); it wrote:\n%s", err, kills, kerr, out.String())
	}
	if !strings.Contains(out.String(), "hog: exit 137\n") {
		t.Fatalf("want the hog killed (137); the server wrote:\n%s", out.String())
	}
	if kerr == nil && kills < 1 {
		t.Fatalf("no OOM kill counted in the group; the server wrote:\n%s", out.String())
	}
}

// oomServerRSS is the size the server grows to: more than the hog can
// reach in the group, less than the hog with its score.
const oomServerRSS = 192 << 20

// TestOOMHelperProcess is the server of TestOOMKillsTheHogNotTheServer,
// run in its own process: it grows its resident memory to oomServerRSS
// (under the race detector, a smaller heap does), says so, waits until it
// is in the group, and runs the hog in a shell.
func TestOOMHelperProcess(t *testing.T) {
	if os.Getenv(oomHelperEnv) != "1" {
		t.Skip("run by TestOOMKillsTheHogNotTheServer")
	}
	var ballast [][]byte
	for residentBytes(t) < oomServerRSS {
		chunk := make([]byte, 4<<20)
		for i := 0; i < len(chunk); i += 4096 {
			chunk[i] = 1
		}
		ballast = append(ballast, chunk)
	}
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	b := newTestBackend(t, nil)
	s := spawn(t, b, t.TempDir())
	_, res := execute(t, s, `python3 -c "x = b'x' * (400 << 20)"`)
	if res.Exec == nil || res.Exec.State != termapi.ExecCompleted {
		t.Fatalf("the hog: %+v", res)
	}
	fmt.Printf("hog: exit %d\n", res.Exec.ExitCode)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := s.Close(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(ballast)
}

// residentBytes is this process's resident memory (VmRSS).
func residentBytes(t *testing.T) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}
