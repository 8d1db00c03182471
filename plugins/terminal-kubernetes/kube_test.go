package terminalkubernetes

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dshdev/dsh/plugins/terminal-kubernetes/kubetest"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
	"github.com/dshdev/dsh/plugins/terminal/terminaltest"
)

// The conformance kit, on cmd/dsh-backend-kubernetes over the plugin
// protocol, with the stdin proof that the pod helper gives.
func TestConformance(t *testing.T) {
	c := kubetest.Require(t)
	ns := c.Namespace(t)
	terminaltest.CheckGoroutines(t,
		goleakIgnoreIdleConns()...)
	terminaltest.TestBackend(t, func(t *testing.T) termapi.Backend {
		cfg := testConfig(c, ns)
		cfg.IdleSilenceMs = 2000
		return openPlugin(t, cfg)
	}, terminaltest.Options{
		EchoCommand:     func(text string) string { return "printf '%s\\n' " + strconv.Quote(text) },
		ReadCommand:     "read line",
		AnswerCommand:   func(prefix string) string { return `read -r line; printf '%s\n' "` + prefix + `$line"` },
		LineCommand:     "stty sane 2>/dev/null; read line",
		SecretCommand:   "stty sane 2>/dev/null; read -s line",
		ProvesStdinWait: true,
		ExitCommand:     "exit 3",
		StatusCommand:   func(code int) string { return "(exit " + strconv.Itoa(code) + ")" },
		SizeCommand:     "stty size",
		Dir:             "/workspace",
		Timeout:         waitLong,
	})
	if pods := c.Pods(t, ns, labelManagedBy+"="+managedByDSH); len(pods) != 0 {
		t.Errorf("%d pods left after the kit", len(pods))
	}
}

// A created pod runs the shell as a user without privileges, in the
// workspace, with state kept between commands; closing deletes the pod.
func TestPodPerOwner(t *testing.T) {
	c := kubetest.Require(t)
	ns := c.Namespace(t)
	b := newBackend(t, testConfig(c, ns))
	s := spawn(t, b, "owner-a")
	if out := mustComplete(t, s, "pwd; id -u; echo made > file; cat file", 0); out != "/workspace\n1000\nmade\n" {
		t.Errorf("output %q", out)
	}
	mustComplete(t, s, "cd /tmp; export KEPT=yes", 0)
	if out := mustComplete(t, s, "echo $PWD $KEPT", 0); out != "/tmp yes\n" {
		t.Errorf("state: %q", out)
	}
	// What the pod's spec promises, as the kernel sees it.
	if out := mustComplete(t, s, "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status | tr -s '\\t ' ' '", 0); out != "NoNewPrivs: 1\nCapEff: 0000000000000000\n" && out != "CapEff: 0000000000000000\nNoNewPrivs: 1\n" {
		t.Errorf("privileges: %q", out)
	}
	if out := mustComplete(t, s, "test -e /var/run/secrets/kubernetes.io/serviceaccount && echo token || echo none", 0); out != "none\n" {
		t.Errorf("service account token: %q", out)
	}
	pods := c.Pods(t, ns, labelOwner+"=owner-a")
	if len(pods) != 1 {
		t.Fatalf("%d pods of owner-a, want 1", len(pods))
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := s.Close(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	if pods := c.Pods(t, ns, labelOwner+"=owner-a"); len(pods) != 0 {
		t.Errorf("%d pods of owner-a after close, want 0", len(pods))
	}
}

// A pod deleted mid-command is the shell's exit, saying so; the next spawn
// gets a fresh pod.
func TestPodDeletedMidCommand(t *testing.T) {
	c := kubetest.Require(t)
	ns := c.Namespace(t)
	b := newBackend(t, testConfig(c, ns))
	s := spawn(t, b, "owner-d")
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	send, err := s.Exec(ctx, termapi.ExecRequest{Command: "echo started; sleep 1000", Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	if line, err := send.Output(ctx); err != nil || line != "started\n" {
		t.Fatalf("output %q, %v", line, err)
	}
	pods := c.Pods(t, ns, labelOwner+"=owner-d")
	if len(pods) != 1 {
		t.Fatalf("%d pods of owner-d, want 1", len(pods))
	}
	zero := int64(0)
	if err := c.Admin.CoreV1().Pods(ns).Delete(ctx, pods[0].Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	res, err := send.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != termapi.WaitSessionExit || !res.Status.Exited {
		t.Fatalf("settled %s with %v, want session_exit", res.Reason, res.Status)
	}
	if !strings.Contains(res.Status.Lost, pods[0].Name) {
		t.Errorf("the exit says %q, want it to name the pod %s", res.Status.Lost, pods[0].Name)
	}
	if _, err := s.Exec(ctx, termapi.ExecRequest{Command: "true"}); !errors.Is(err, termapi.ErrSessionExited) {
		t.Errorf("exec after the delete: %v, want ErrSessionExited", err)
	}
	s.Close(ctx, "test")
	again := spawn(t, b, "owner-d")
	if out := mustComplete(t, again, "echo back", 0); out != "back\n" {
		t.Errorf("new session: %q", out)
	}
}

// Twenty owners at once get twenty pods, and every one is gone after
// their sessions close.
func TestTwentyOwners(t *testing.T) {
	c := kubetest.Require(t)
	ns := c.Namespace(t)
	b := newBackend(t, testConfig(c, ns))
	const owners = 20
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitLong)
	defer cancel()
	sessions := make([]termapi.Session, owners)
	errs := make([]error, owners)
	var wg sync.WaitGroup
	for i := range owners {
		wg.Go(func() {
			sessions[i], errs[i] = b.Spawn(ctx, termapi.SpawnSpec{SessionID: fmt.Sprintf("s%d", i), OwnerID: fmt.Sprintf("owner-%d", i)})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("owner %d: %v", i, err)
		}
	}
	if pods := c.Pods(t, ns, labelManagedBy+"="+managedByDSH); len(pods) != owners {
		t.Errorf("%d pods, want %d", len(pods), owners)
	}
	for i, s := range sessions {
		if s == nil {
			continue
		}
		if out := mustComplete(t, s, "echo $DSH_SESSION_ID", 0); out != fmt.Sprintf("owner-%d\n", i) {
			t.Errorf("owner %d: %q", i, out)
		}
	}
	for _, s := range sessions {
		if s == nil {
			continue
		}
		wg.Go(func() {
			if err := s.Close(ctx, "test"); err != nil {
				t.Errorf("close: %v", err)
			}
		})
	}
	wg.Wait()
	if pods := c.Pods(t, ns, labelManagedBy+"="+managedByDSH); len(pods) != 0 {
		t.Errorf("%d pods after close, want 0", len(pods))
	}
}

// A dsh killed with kill -9 leaves its pods; the next one of the same
// identity removes them once the dead one's lease has run out.
func TestKilledInstanceLeavesNothingForLong(t *testing.T) {
	c := kubetest.Require(t)
	ns := c.Namespace(t)
	cfg := testConfig(c, ns)
	p := openPluginClosing(t, cfg, false)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if _, err := p.Spawn(ctx, termapi.SpawnSpec{SessionID: "pty-k", OwnerID: "owner-k"}); err != nil {
		t.Fatal(err)
	}
	if pods := c.Pods(t, ns, labelOwner+"=owner-k"); len(pods) != 1 {
		t.Fatalf("%d pods of owner-k, want 1", len(pods))
	}
	killPlugin(t)
	newBackend(t, cfg)
	deadline := time.Now().Add(waitLong)
	for {
		pods := c.Pods(t, ns, labelOwner+"=owner-k")
		if len(pods) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed instance's pod %s is still there", pods[0].Name)
		}
		// The next sweep runs a third of a lease from now.
		time.Sleep(time.Duration(cfg.LeaseSeconds) * time.Second / 3)
	}
}

// A shell killed by a signal says which, through the helper; `exit 137`
// is an exit with that code.
func TestShellKilledBySignal(t *testing.T) {
	c := kubetest.Require(t)
	b := newBackend(t, testConfig(c, c.Namespace(t)))
	for _, tc := range []struct {
		command string
		want    termapi.Status
	}{
		{"kill -9 $$", termapi.Status{Exited: true, ExitCode: -1, Signal: "SIGKILL"}},
		{"exit 137", termapi.Status{Exited: true, ExitCode: 137}},
	} {
		s := spawn(t, b, "owner-sig")
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		send, err := s.Exec(ctx, termapi.ExecRequest{Command: tc.command})
		if err != nil {
			t.Fatal(err)
		}
		res, err := send.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Reason != termapi.WaitSessionExit || res.Status != tc.want {
			t.Errorf("%s: settled %s with %+v, want session_exit with %+v", tc.command, res.Reason, res.Status, tc.want)
		}
	}
}
