package terminal_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dshdev/dsh/plugins/terminal"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// confiningBackend is a stub that honours the spawn's sandbox mode, with
// read-only as its own.
func confiningBackend() *stubBackend {
	return &stubBackend{typ: "shell", spawn: func(_ context.Context, spec termapi.SpawnSpec) (termapi.Session, error) {
		s := newStubSession()
		s.caps.Sandbox = spec.Policy.Sandbox.Or(termapi.SandboxReadOnly)
		return s, nil
	}}
}

// The fence of §3.9: an owner's mode cannot change while it has sessions,
// and the message is the original's.
func TestSandboxModeFence(t *testing.T) {
	h := newHost(t)
	b := confiningBackend()
	svc := newService(t, b)
	owner, other := newOwner(t, h, "agent"), newOwner(t, h, "other")
	mode := func(m termapi.SandboxMode) termapi.Policy { return termapi.Policy{Sandbox: m} }

	// No sessions: any mode may be set, and spawns ask for it.
	if err := svc.SetPolicy(owner, mode(termapi.SandboxWorkspaceWrite)); err != nil {
		t.Fatal(err)
	}
	info := mustSpawn(t, svc, owner, "shell", "")
	if got := b.specs[len(b.specs)-1].Policy.Sandbox; got != termapi.SandboxWorkspaceWrite {
		t.Errorf("spawn asked for %q, want workspace-write", got)
	}
	if info.Capabilities.Sandbox != termapi.SandboxWorkspaceWrite {
		t.Errorf("the session's info says it runs in %q", info.Capabilities.Sandbox)
	}

	// With a session open: the same mode is fine, another is refused.
	if err := svc.SetPolicy(owner, mode(termapi.SandboxWorkspaceWrite)); err != nil {
		t.Errorf("setting the current mode: %v", err)
	}
	err := svc.SetPolicy(owner, mode(termapi.SandboxFullAccess))
	want := `cannot change sandbox mode from "workspace-write" to "danger-full-access" while persistent terminal sessions are open or being created; wait for creation to settle and close them first`
	if !errors.Is(err, terminal.ErrPolicyFenced) || err.Error() != want {
		t.Fatalf("change with a session open: %v\nwant %s", err, want)
	}
	if svc.Policy(owner).Sandbox != termapi.SandboxWorkspaceWrite {
		t.Errorf("the refused change took effect: %q", svc.Policy(owner).Sandbox)
	}
	// Limits are fenced with the mode; the size is not.
	limited := mode(termapi.SandboxWorkspaceWrite)
	limited.Limits.Pids = 64
	if err := svc.SetPolicy(owner, limited); !errors.Is(err, terminal.ErrPolicyFenced) {
		t.Errorf("a change of limits with a session open: %v", err)
	}
	sized := mode(termapi.SandboxWorkspaceWrite)
	sized.Size = termapi.Size{Rows: 30, Cols: 90}
	if err := svc.SetPolicy(owner, sized); err != nil {
		t.Errorf("a change of size with a session open: %v", err)
	}

	// Another owner is not fenced by this one's sessions.
	if err := svc.SetPolicy(other, mode(termapi.SandboxReadOnly)); err != nil {
		t.Errorf("another owner: %v", err)
	}

	// Closed again, the owner may change its mode.
	if _, err := svc.Kill(t.Context(), owner, info.ID, "test"); err != nil {
		t.Fatal(err)
	}
	if err := svc.SetPolicy(owner, mode(termapi.SandboxFullAccess)); err != nil {
		t.Errorf("change after the close: %v", err)
	}
}

// Without an explicit mode, the fence uses the mode the sessions run in.
func TestSandboxModeFenceUsesTheBackendsMode(t *testing.T) {
	h := newHost(t)
	svc := newService(t, confiningBackend())
	owner := newOwner(t, h, "agent")
	mustSpawn(t, svc, owner, "shell", "")
	err := svc.SetPolicy(owner, termapi.Policy{Sandbox: termapi.SandboxWorkspaceWrite})
	if !errors.Is(err, terminal.ErrPolicyFenced) || !strings.Contains(err.Error(), `from "read-only" to "workspace-write"`) {
		t.Errorf("got %v", err)
	}
}

// A backend that does not check the policy it is given cannot take a
// confined or limited owner: the spawn is refused and its session closed,
// never run unconfined or unlimited.
func TestPolicyRefusedByAnUnawareBackend(t *testing.T) {
	for _, tc := range []struct {
		policy termapi.Policy
		want   error
	}{
		{termapi.Policy{Sandbox: termapi.SandboxReadOnly}, termapi.ErrSandboxUnsupported},
		{termapi.Policy{Limits: termapi.Limits{Memory: 1 << 30}}, termapi.ErrLimitsUnsupported},
	} {
		h := newHost(t)
		b := &stubBackend{typ: "shell"}
		svc := newService(t, b)
		owner := newOwner(t, h, "agent")
		if err := svc.SetPolicy(owner, tc.policy); err != nil {
			t.Fatal(err)
		}
		_, err := svc.Spawn(t.Context(), owner, terminal.SpawnRequest{Type: "shell"})
		if !errors.Is(err, tc.want) {
			t.Fatalf("spawn with %+v: %v, want %v", tc.policy, err, tc.want)
		}
		if len(b.sessions) != 1 || len(b.sessions[0].reasons) == 0 {
			t.Errorf("the session that does not enforce %+v was not closed", tc.policy)
		}
	}
	h := newHost(t)
	svc := newService(t, &stubBackend{typ: "shell"})
	owner := newOwner(t, h, "agent")
	if err := svc.SetPolicy(owner, termapi.Policy{Sandbox: "strict"}); !errors.Is(err, termapi.ErrInvalidSandboxMode) {
		t.Errorf("invalid mode: %v", err)
	}
	if err := svc.SetPolicy(owner, termapi.Policy{Size: termapi.Size{Rows: 0, Cols: 5}}); err == nil {
		t.Errorf("an invalid size was taken")
	}
}
