package terminal_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dshdev/dsh/plugins/terminal/termapi"

	"github.com/dshdev/dsh/plugins/terminal"
)

// moded is a stub session that runs in the mode its spawn asked for.
type moded struct {
	*stubSession
	mode string
}

func (m moded) SandboxMode() string { return m.mode }

// confiningBackend is a stub that honours SpawnSpec.Sandbox, with read-only
// as its own mode.
func confiningBackend() *stubBackend {
	return &stubBackend{typ: "shell", spawn: func(_ context.Context, spec termapi.SpawnSpec) (termapi.Session, error) {
		mode := spec.Sandbox
		if mode == "" {
			mode = termapi.SandboxReadOnly
		}
		return moded{newStubSession(), mode}, nil
	}}
}

// The fence of §3.9: an owner's mode cannot change while it has sessions,
// and the message is the original's.
func TestSandboxModeFence(t *testing.T) {
	h := newHost(t)
	b := confiningBackend()
	svc := newService(t, b)
	owner, other := newOwner(t, h, "agent"), newOwner(t, h, "other")

	// No sessions: any mode may be set, and spawns ask for it.
	if err := svc.SetSandboxMode(owner, termapi.SandboxWorkspaceWrite); err != nil {
		t.Fatal(err)
	}
	info := mustSpawn(t, svc, owner, "shell", "")
	if got := b.specs[len(b.specs)-1].Sandbox; got != termapi.SandboxWorkspaceWrite {
		t.Errorf("spawn asked for %q, want workspace-write", got)
	}

	// With a session open: the same mode is fine, another is refused.
	if err := svc.SetSandboxMode(owner, termapi.SandboxWorkspaceWrite); err != nil {
		t.Errorf("setting the current mode: %v", err)
	}
	err := svc.SetSandboxMode(owner, termapi.SandboxFullAccess)
	want := `cannot change sandbox mode from "workspace-write" to "danger-full-access" while persistent terminal sessions are open or being created; wait for creation to settle and close them first`
	if !errors.Is(err, terminal.ErrSandboxModeFenced) || err.Error() != want {
		t.Fatalf("change with a session open: %v\nwant %s", err, want)
	}
	if svc.SandboxMode(owner) != termapi.SandboxWorkspaceWrite {
		t.Errorf("the refused change took effect: %q", svc.SandboxMode(owner))
	}

	// Another owner is not fenced by this one's sessions.
	if err := svc.SetSandboxMode(other, termapi.SandboxReadOnly); err != nil {
		t.Errorf("another owner: %v", err)
	}

	// Closed again, the owner may change its mode.
	if _, err := svc.Kill(t.Context(), owner, info.ID, "test"); err != nil {
		t.Fatal(err)
	}
	if err := svc.SetSandboxMode(owner, termapi.SandboxFullAccess); err != nil {
		t.Errorf("change after the close: %v", err)
	}
}

// Without an explicit mode, the fence uses the mode the sessions run in.
func TestSandboxModeFenceUsesTheBackendsMode(t *testing.T) {
	h := newHost(t)
	svc := newService(t, confiningBackend())
	owner := newOwner(t, h, "agent")
	mustSpawn(t, svc, owner, "shell", "")
	err := svc.SetSandboxMode(owner, termapi.SandboxWorkspaceWrite)
	if !errors.Is(err, terminal.ErrSandboxModeFenced) || !strings.Contains(err.Error(), `from "read-only" to "workspace-write"`) {
		t.Errorf("got %v", err)
	}
}

// A backend that knows nothing of sandboxes cannot take a confined owner:
// the spawn is refused and its session closed, never run unconfined.
func TestSandboxModeRefusedByAnUnawareBackend(t *testing.T) {
	h := newHost(t)
	b := &stubBackend{typ: "shell"}
	svc := newService(t, b)
	owner := newOwner(t, h, "agent")
	if err := svc.SetSandboxMode(owner, termapi.SandboxReadOnly); err != nil {
		t.Fatal(err)
	}
	_, err := svc.Spawn(t.Context(), owner, terminal.SpawnRequest{Type: "shell"})
	if !errors.Is(err, termapi.ErrSandboxUnsupported) {
		t.Fatalf("spawn: %v, want ErrSandboxUnsupported", err)
	}
	if len(b.sessions) != 1 || len(b.sessions[0].reasons) == 0 {
		t.Errorf("the unconfined session was not closed")
	}
	if err := svc.SetSandboxMode(owner, "strict"); !errors.Is(err, termapi.ErrInvalidSandboxMode) {
		t.Errorf("invalid mode: %v", err)
	}
}
