package terminal_test

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// await receives from ch, failing the test if nothing arrives in a
// generous bound (inside a synctest bubble the bound turns a deadlock into a
// failure at once).
func await[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatal("timed out waiting for an event")
		var zero T
		return zero
	}
}

// wantErr fails unless err matches target (errors.Is) and, when msg is
// non-empty, reads exactly msg.
func wantErr(t *testing.T, err, target error, msg string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want one matching %v", err, target)
	}
	if msg != "" && err.Error() != msg {
		t.Fatalf("error text = %q, want %q", err.Error(), msg)
	}
}

func TestRegisterBackend(t *testing.T) {
	svc := newService(t)
	unregisterA, err := svc.RegisterBackend(&stubBackend{typ: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.RegisterBackend(&stubBackend{typ: "b"}); err != nil {
		t.Fatal(err)
	}
	if got, want := svc.Backends(), []string{"a", "b"}; !slices.Equal(got, want) {
		t.Fatalf("Backends() = %v, want %v", got, want)
	}

	for _, tc := range []struct {
		name   string
		typ    string
		target error
		msg    string
	}{
		{"duplicate type", "a", terminal.ErrDuplicateBackend, `a PTY backend named "a" is already registered`},
		{"empty type", "", nil, "PTY backend type must be non-empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.RegisterBackend(&stubBackend{typ: tc.typ})
			if err == nil || err.Error() != tc.msg {
				t.Fatalf("RegisterBackend(%q) error = %v, want %q", tc.typ, err, tc.msg)
			}
			if tc.target != nil && !errors.Is(err, tc.target) {
				t.Fatalf("error %v does not match %v", err, tc.target)
			}
		})
	}

	// The disposer removes its own registration only: once "a" has been
	// registered anew, the stale disposer leaves the new one alone.
	unregisterA()
	if _, err := svc.RegisterBackend(&stubBackend{typ: "a"}); err != nil {
		t.Fatal(err)
	}
	unregisterA()
	if got, want := svc.Backends(), []string{"b", "a"}; !slices.Equal(got, want) {
		t.Fatalf("after a stale unregister, Backends() = %v, want %v", got, want)
	}
}

func TestUnregisterKeepsSessions(t *testing.T) {
	h := newHost(t)
	owner := newOwner(t, h, "agent")
	b := &stubBackend{typ: "stub"}
	svc := terminal.NewService()
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	unregister, err := svc.RegisterBackend(b)
	if err != nil {
		t.Fatal(err)
	}
	info := mustSpawn(t, svc, owner, "stub", "")
	unregister()

	res, err := svc.Read(owner, info.ID, termapi.ReadRequest{})
	if err != nil || res.Text != "0:0" {
		t.Fatalf("Read after unregister = %+v, %v; want the session to answer", res, err)
	}
	_, err = svc.Spawn(t.Context(), owner, terminal.SpawnRequest{Type: "stub"})
	wantErr(t, err, terminal.ErrNoBackend, `no PTY backend registered for "stub"`)

	if err := owner.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := b.session(0).closeReasons(), []string{"PTY owner disposed"}; !slices.Equal(got, want) {
		t.Fatalf("close reasons = %q, want %q", got, want)
	}
	if got := svc.List(owner); len(got) != 0 {
		t.Fatalf("List after owner close = %+v, want none", got)
	}
}

func TestSpawn(t *testing.T) {
	h := newHost(t)
	owner := newOwner(t, h, "agent")
	foreign := newOwner(t, h, "other")
	b := &stubBackend{typ: "stub"}
	svc := newService(t, b)

	info, err := svc.Spawn(t.Context(), owner, terminal.SpawnRequest{Type: "stub", Name: "main", Cwd: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	wantID(t, info.ID)
	want := terminal.SessionInfo{ID: info.ID, Name: "main", Type: "stub", PID: 123, Status: termapi.Running, Motd: "stub ready"}
	if info != want {
		t.Fatalf("Spawn = %+v, want %+v", info, want)
	}
	if got, want := b.spec(0), (termapi.SpawnSpec{SessionID: info.ID, OwnerID: "agent", Cwd: "/tmp", Name: "main"}); got != want {
		t.Fatalf("backend spec = %+v, want %+v", got, want)
	}

	// Without a cwd the session starts in the owner's workspace.
	info2 := mustSpawn(t, svc, owner, "stub", "")
	if wantID(t, info2.ID); info2.ID == info.ID {
		t.Fatalf("second id = %q, the first's", info2.ID)
	}
	if got := b.spec(1).Cwd; got != owner.Workdir() {
		t.Fatalf("default cwd = %q, want the owner's workdir %q", got, owner.Workdir())
	}

	if !svc.HasActivity(owner) || svc.HasActivity(foreign) {
		t.Fatalf("HasActivity(owner, foreign) = %v, %v; want true, false", svc.HasActivity(owner), svc.HasActivity(foreign))
	}
	if got := svc.List(owner); len(got) != 2 || got[0] != want {
		t.Fatalf("List(owner) = %+v, want the two sessions, first %+v", got, want)
	}
	if got := svc.List(foreign); len(got) != 0 {
		t.Fatalf("List(foreign) = %+v, want none", got)
	}
}

func TestSpawnWithoutPID(t *testing.T) {
	h := newHost(t)
	owner := newOwner(t, h, "agent")
	svc := newService(t, &stubBackend{typ: "stub", spawn: func(context.Context, termapi.SpawnSpec) (termapi.Session, error) {
		s := newStubSession()
		s.pid = 0
		return s, nil
	}})
	if info := mustSpawn(t, svc, owner, "stub", ""); info.PID != 0 {
		t.Fatalf("PID = %d, want 0 for a backend session without a process", info.PID)
	}
}

func TestSpawnBackendFailure(t *testing.T) {
	h := newHost(t)
	owner := newOwner(t, h, "agent")
	providerFailed := errors.New("provider failed")
	fail := true
	b := &stubBackend{typ: "stub", spawn: func(context.Context, termapi.SpawnSpec) (termapi.Session, error) {
		if fail {
			return nil, providerFailed
		}
		return newStubSession(), nil
	}}
	svc := newService(t, b)

	_, err := svc.Spawn(t.Context(), owner, terminal.SpawnRequest{Type: "stub", Name: "main"})
	failedID := b.spec(0).SessionID
	wantErr(t, err, providerFailed, "start PTY session "+failedID+" (stub): provider failed")
	if svc.HasActivity(owner) {
		t.Fatal("a spawn that failed cleanly left owner activity")
	}

	// The failed spawn's id is never used again; its name is free.
	fail = false
	if info := mustSpawn(t, svc, owner, "stub", "main"); info.ID == failedID {
		t.Fatalf("id after a failed spawn = %q, the failed spawn's", info.ID)
	}
}

func TestSpawnCheckOrder(t *testing.T) {
	cause := errors.New("caller gave up")
	for _, tc := range []struct {
		name         string
		closeService bool
		cancel       bool
		owner        string // "live", "closed" or "nil"
		typ          string
		sessionName  string
		target       error
		msg          string
	}{
		{name: "service closing first", closeService: true, cancel: true, owner: "closed", typ: "missing",
			target: terminal.ErrServiceClosing, msg: "PTY service is closing"},
		{name: "cancelled context before owner", cancel: true, owner: "closed", typ: "missing",
			target: cause, msg: cause.Error()},
		{name: "closed owner before backend", owner: "closed", typ: "missing",
			target: terminal.ErrOwnerNotLive, msg: `PTY owner "dead" is not live`},
		{name: "nil owner", owner: "nil", typ: "stub",
			target: terminal.ErrOwnerNotLive, msg: "no PTY owner given"},
		{name: "backend before name", owner: "live", typ: "missing", sessionName: "main",
			target: terminal.ErrNoBackend, msg: `no PTY backend registered for "missing"`},
		{name: "published name", owner: "live", typ: "stub", sessionName: "main",
			target: terminal.ErrDuplicateName, msg: `PTY session name "main" already exists for this owner`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t)
			live := newOwner(t, h, "agent")
			b := &stubBackend{typ: "stub"}
			svc := newService(t, b)
			mustSpawn(t, svc, live, "stub", "main")

			var owner *host.Owner
			switch tc.owner {
			case "live":
				owner = live
			case "closed":
				owner = newOwner(t, h, "dead")
				if err := owner.Close(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			if tc.cancel {
				cancel(cause)
			}
			if tc.closeService {
				if err := svc.Close(t.Context()); err != nil {
					t.Fatal(err)
				}
			}

			_, err := svc.Spawn(ctx, owner, terminal.SpawnRequest{Type: tc.typ, Name: tc.sessionName})
			wantErr(t, err, tc.target, tc.msg)
			if tc.target == cause && err != cause {
				t.Fatalf("error = %#v, want the caller's cause itself", err)
			}
			b.mu.Lock()
			calls := len(b.specs)
			b.mu.Unlock()
			if calls != 1 {
				t.Fatalf("backend spawned %d times, want only the setup spawn", calls)
			}
			if !tc.closeService {
				// Checks that fail before the backend runs leave the
				// service as it was.
				if info := mustSpawn(t, svc, live, "stub", ""); len(svc.List(live)) != 2 {
					t.Fatalf("after the refused spawn, %s joined %+v", info.ID, svc.List(live))
				}
			}
		})
	}
}

func TestSpawnNames(t *testing.T) {
	h := newHost(t)
	owner := newOwner(t, h, "agent")
	other := newOwner(t, h, "other")
	gate := newGatedSpawn()
	svc := newService(t, &stubBackend{typ: "stub", spawn: func(ctx context.Context, spec termapi.SpawnSpec) (termapi.Session, error) {
		if spec.OwnerID == "agent" && spec.Name == "one" {
			return gate.spawn(ctx, spec)
		}
		return newStubSession(), nil
	}})

	pending := make(chan error, 1)
	go func() {
		_, err := svc.Spawn(t.Context(), owner, terminal.SpawnRequest{Type: "stub", Name: "one"})
		pending <- err
	}()
	await(t, gate.started)

	_, err := svc.Spawn(t.Context(), owner, terminal.SpawnRequest{Type: "stub", Name: "one"})
	wantErr(t, err, terminal.ErrDuplicateName, `PTY session name "one" is already being created`)
	// Another name, and the same name for another owner, are fine meanwhile.
	mustSpawn(t, svc, owner, "stub", "two")
	mustSpawn(t, svc, other, "stub", "one")
	if !svc.HasActivity(owner) {
		t.Fatal("a pending spawn is owner activity")
	}

	gate.release <- spawnOutcome{session: newStubSession()}
	if err := await(t, pending); err != nil {
		t.Fatalf("pending spawn: %v", err)
	}
	_, err = svc.Spawn(t.Context(), owner, terminal.SpawnRequest{Type: "stub", Name: "one"})
	wantErr(t, err, terminal.ErrDuplicateName, `PTY session name "one" already exists for this owner`)

	// Killing a session frees its name.
	two := svc.List(owner)[0]
	if ok, err := svc.Kill(t.Context(), owner, two.ID, ""); !ok || err != nil {
		t.Fatalf("Kill = %v, %v", ok, err)
	}
	mustSpawn(t, svc, owner, "stub", "two")
}

func TestFencing(t *testing.T) {
	h := newHost(t)
	owner := newOwner(t, h, "agent")
	// Another owner, of this host or of another: only the owner's key
	// (its id) grants access.
	foreign := newOwner(t, newHost(t), "agent-2")
	b := &stubBackend{typ: "stub"}
	svc := newService(t, b)
	info := mustSpawn(t, svc, owner, "stub", "")

	ops := []struct {
		name string
		call func(owner *host.Owner, id string) error
	}{
		{"StartSend", func(o *host.Owner, id string) error {
			_, err := svc.StartSend(t.Context(), o, id, termapi.SendRequest{Text: "x"})
			return err
		}},
		{"Read", func(o *host.Owner, id string) error {
			_, err := svc.Read(o, id, termapi.ReadRequest{})
			return err
		}},
		{"Signal", func(o *host.Owner, id string) error {
			_, err := svc.Signal(t.Context(), o, id, termapi.SIGINT)
			return err
		}},
		{"Kill", func(o *host.Owner, id string) error {
			_, err := svc.Kill(t.Context(), o, id, "")
			return err
		}},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			foreignErr := op.call(foreign, info.ID)
			wantErr(t, foreignErr, termapi.ErrNoSession, "unknown PTY session "+info.ID)
			// An unknown id of the caller's own reads the same.
			wantErr(t, op.call(owner, "pty-99"), termapi.ErrNoSession, "unknown PTY session pty-99")
		})
	}
	if got := svc.List(foreign); len(got) != 0 {
		t.Fatalf("List(foreign) = %+v, want none", got)
	}
	if svc.HasActivity(foreign) {
		t.Fatal("HasActivity(foreign) = true")
	}
	sess := b.session(0)
	if got := sess.closeReasons(); len(got) != 0 {
		t.Fatalf("foreign calls reached the backend: close reasons %q", got)
	}
	sess.mu.Lock()
	touched := len(sess.sends) + sess.reads
	sess.mu.Unlock()
	if touched != 0 {
		t.Fatalf("foreign calls reached the backend (%d calls)", touched)
	}
	if got := svc.List(owner); len(got) != 1 {
		t.Fatalf("List(owner) = %+v, want the session unharmed", got)
	}
	// The key is what the fence compares: an owner object with the same
	// key (a restarted front, which the host allows once the first is
	// gone) reaches the session as its own, until the first's disposal
	// has begun.
	sameKey := newOwner(t, newHost(t), "agent")
	if _, err := svc.Read(sameKey, info.ID, termapi.ReadRequest{}); err != nil {
		t.Fatalf("Read by an owner with the same key: %v", err)
	}
	if err := owner.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Read(sameKey, info.ID, termapi.ReadRequest{}); !errors.Is(err, termapi.ErrNoSession) {
		t.Fatalf("Read after the owner's disposal: %v, want ErrNoSession", err)
	}
}

func TestList(t *testing.T) {
	h := newHost(t)
	owner := newOwner(t, h, "agent")
	b := &stubBackend{typ: "stub"}
	svc := newService(t, b)
	var ids []string
	for _, name := range []string{"a", "b", "c"} {
		ids = append(ids, mustSpawn(t, svc, owner, "stub", name).ID)
	}
	if ok, err := svc.Kill(t.Context(), owner, ids[1], ""); !ok || err != nil {
		t.Fatalf("Kill = %v, %v", ok, err)
	}
	exited := termapi.Status{Exited: true, ExitCode: 3}
	b.session(2).setStatus(exited)

	got := svc.List(owner)
	want := []terminal.SessionInfo{
		{ID: ids[0], Name: "a", Type: "stub", PID: 123, Status: termapi.Running, Motd: "stub ready"},
		{ID: ids[2], Name: "c", Type: "stub", PID: 123, Status: exited, Motd: "stub ready"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("List = %+v, want %+v", got, want)
	}
	if got := svc.List(nil); len(got) != 0 {
		t.Fatalf("List(nil) = %+v, want none", got)
	}
}

// sessionIDPattern is what the service's session ids look like: random, so
// that an id is never reused, not even by another process.
var sessionIDPattern = regexp.MustCompile(`^pty-[a-z2-7]{16}$`)

func wantID(t *testing.T, id string) {
	t.Helper()
	if !sessionIDPattern.MatchString(id) {
		t.Fatalf("session id %q does not match %s", id, sessionIDPattern)
	}
}
