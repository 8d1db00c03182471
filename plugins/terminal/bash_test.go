//go:build linux

package terminal_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal"
	_ "github.com/dshdev/dsh/plugins/terminal-bash/plugin" // registers the "terminal-bash" plugin
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// loadBash loads the real plugins, terminal and terminal-bash, from the
// default registry, plus a probe that hands the test the service.
func loadBash(t *testing.T) (*host.Host, *terminal.Service) {
	t.Helper()
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("no /bin/bash:", err)
	}
	reg := host.NewRegistry()
	for _, name := range []string{terminal.PluginName, "terminal-bash"} {
		p, ok := host.DefaultRegistry().Lookup(name)
		if !ok {
			t.Fatalf("plugin %q is not registered", name)
		}
		reg.Register(p)
	}
	var svc *terminal.Service
	reg.Register(host.Plugin{
		Name:   "probe",
		Inject: []host.Key{terminal.ServiceKey},
		Apply: func(pctx *host.Context, _ any) (_ any, err error) {
			svc, err = host.Service[*terminal.Service](pctx, terminal.ServiceKey)
			return nil, err
		},
	})
	d, err := host.ParseDeployment("bash.yaml", []byte("- name: terminal\n- name: terminal-bash\n- name: probe\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Load(t.Context(), d, host.WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(context.Background()); err != nil {
			t.Errorf("host close: %v", err)
		}
	})
	return h, svc
}

// step bounds one operation on a real shell generously; nothing asserts on
// how long it takes.
func step(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// run sends line and returns its streamed output once the shell is ready.
func run(t *testing.T, svc *terminal.Service, owner *host.Owner, id, line string) string {
	t.Helper()
	ctx := step(t)
	send, err := svc.StartSend(ctx, owner, id, termapi.SendRequest{Text: line, Submit: true, Stream: true})
	if err != nil {
		t.Fatalf("StartSend(%q): %v", line, err)
	}
	var out strings.Builder
	for {
		chunk, err := send.Output(ctx)
		out.WriteString(chunk)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Output of %q: %v", line, err)
		}
	}
	res, err := send.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait for %q: %v", line, err)
	}
	if res.Reason != termapi.WaitStdinRead {
		t.Fatalf("%q settled with %q, want %q", line, res.Reason, termapi.WaitStdinRead)
	}
	return out.String()
}

func hasLine(out, want string) bool {
	for line := range strings.SplitSeq(out, "\n") {
		if strings.TrimSpace(line) == want {
			return true
		}
	}
	return false
}

// wantProcessGone fails if pid still names a process.
func wantProcessGone(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process %d still exists (kill 0: %v)", pid, err)
	}
}

func TestServiceWithBash(t *testing.T) {
	h, svc := loadBash(t)
	owner := newOwner(t, h, "agent")
	foreign := newOwner(t, h, "other")

	info, err := svc.Spawn(step(t), owner, terminal.SpawnRequest{Type: "shell", Name: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if !sessionIDPattern.MatchString(info.ID) || info.Name != "main" || info.Type != "shell" || info.PID <= 0 || info.Motd != "" || info.Status != termapi.Running {
		t.Fatalf("Spawn = %+v", info)
	}

	// The shell starts in the owner's workspace.
	workdir, err := filepath.EvalSymlinks(owner.Workdir())
	if err != nil {
		t.Fatal(err)
	}
	if out := run(t, svc, owner, info.ID, "pwd -P"); !hasLine(out, workdir) {
		t.Fatalf("pwd printed %q, want %q", out, workdir)
	}

	_, err = svc.Read(foreign, info.ID, termapi.ReadRequest{})
	wantErr(t, err, termapi.ErrNoSession, "unknown PTY session "+info.ID)

	// A program waiting on input: the service holds the slot until the
	// holder sees the send settle, and the shell proves the wait.
	ctx := step(t)
	reading, err := svc.StartSend(ctx, owner, info.ID, termapi.SendRequest{Text: "read line", Submit: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.StartSend(ctx, owner, info.ID, termapi.SendRequest{Text: "true", Submit: true})
	wantErr(t, err, termapi.ErrSendActive, "")
	res, err := reading.Wait(ctx)
	if err != nil || res.Reason != termapi.WaitStdinRead {
		t.Fatalf("read settled with %+v, %v; want %q", res, err, termapi.WaitStdinRead)
	}
	// Interrupt the waiting program the way the bash tool recovers.
	nudge, err := svc.StartSend(ctx, owner, info.ID, termapi.SendRequest{})
	if err != nil {
		t.Fatal(err)
	}
	nudge.Cancel()
	if _, err := nudge.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if out := run(t, svc, owner, info.ID, "echo $((6*7))"); !hasLine(out, "42") {
		t.Fatalf("after the interrupt, echo printed %q", out)
	}

	if ok, err := svc.Kill(step(t), owner, info.ID, ""); !ok || err != nil {
		t.Fatalf("Kill = %v, %v", ok, err)
	}
	wantProcessGone(t, info.PID)

	// Owner disposal closes the owner's shells and waits until they are
	// gone; host close then unloads the service.
	second, err := svc.Spawn(step(t), owner, terminal.SpawnRequest{Type: "shell"})
	if err != nil {
		t.Fatal(err)
	}
	if err := owner.Close(step(t)); err != nil {
		t.Fatal(err)
	}
	wantProcessGone(t, second.PID)
	if svc.HasActivity(owner) {
		t.Fatal("activity remains after the owner closed")
	}

	third, err := svc.Spawn(step(t), foreign, terminal.SpawnRequest{Type: "shell"})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Close(step(t)); err != nil {
		t.Fatal(err)
	}
	wantProcessGone(t, third.PID)
}
