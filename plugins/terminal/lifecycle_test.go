package terminal_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

var errClose = errors.New("close failed")

// fixture is one owner with one stub session in a fresh service.
type fixture struct {
	svc   *terminal.Service
	owner *host.Owner
	id    string
	sess  *stubSession
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	h := newHost(t)
	owner := newOwner(t, h, "agent")
	b := &stubBackend{typ: "stub"}
	svc := newService(t, b)
	id := mustSpawn(t, svc, owner, "stub", "").ID
	return &fixture{svc: svc, owner: owner, id: id, sess: b.session(0)}
}

func (f *fixture) start(ctx context.Context) (termapi.Send, error) {
	return f.svc.StartSend(ctx, f.owner, f.id, termapi.SendRequest{Text: "true", Submit: true})
}

// mustStart starts a send and returns it with the backend's send behind it.
func (f *fixture) mustStart(t *testing.T) (termapi.Send, *stubSend) {
	t.Helper()
	send, err := f.start(t.Context())
	if err != nil {
		t.Fatalf("StartSend: %v", err)
	}
	return send, f.sess.lastSend()
}

func (f *fixture) wantActive(t *testing.T) {
	t.Helper()
	_, err := f.start(t.Context())
	wantErr(t, err, termapi.ErrSendActive, fmt.Sprintf("PTY session %s already has an active send", f.id))
}

var settled = termapi.SendResult{Reason: termapi.WaitStdinRead, Viewport: "stub> ", Status: termapi.Running}

func TestSendSlot(t *testing.T) {
	t.Run("one live send until Wait sees it settle", func(t *testing.T) {
		f := newFixture(t)
		send, backend := f.mustStart(t)
		f.wantActive(t)
		backend.lines <- "line\n"
		if out, err := send.Output(t.Context()); out != "line\n" || err != nil {
			t.Fatalf("Output = %q, %v; want the backend's line", out, err)
		}
		if !send.Cancel() || backend.cancelCount() != 1 {
			t.Fatal("Cancel before settling did not reach the backend")
		}
		backend.settle(settled, nil)
		if res, err := send.Wait(t.Context()); res != settled || err != nil {
			t.Fatalf("Wait = %+v, %v", res, err)
		}
		if send.Cancel() {
			t.Fatal("Cancel after settling = true")
		}
		f.mustStart(t)
	})

	t.Run("a Wait cut short by its context keeps the slot; EOF frees it", func(t *testing.T) {
		f := newFixture(t)
		send, backend := f.mustStart(t)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := send.Wait(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait with a cancelled context = %v", err)
		}
		f.wantActive(t)
		backend.settle(settled, nil)
		if _, err := send.Output(t.Context()); !errors.Is(err, io.EOF) {
			t.Fatalf("Output after settling = %v, want io.EOF", err)
		}
		f.mustStart(t)
	})

	t.Run("a failed send frees the slot", func(t *testing.T) {
		f := newFixture(t)
		send, backend := f.mustStart(t)
		sendFailed := errors.New("send failed")
		backend.settle(termapi.SendResult{}, sendFailed)
		if _, err := send.Wait(t.Context()); err != sendFailed {
			t.Fatalf("Wait = %v, want the backend's failure", err)
		}
		f.mustStart(t)
	})

	t.Run("the backend's own refusal surfaces and holds nothing", func(t *testing.T) {
		f := newFixture(t)
		draining := fmt.Errorf("session still draining an interrupt: %w", termapi.ErrSendActive)
		f.sess.mu.Lock()
		f.sess.startErr = draining
		f.sess.mu.Unlock()
		if _, err := f.start(t.Context()); err != draining {
			t.Fatalf("StartSend = %v, want the backend's error", err)
		}
		f.sess.mu.Lock()
		f.sess.startErr = nil
		f.sess.mu.Unlock()
		f.mustStart(t)
	})

	t.Run("a done context is refused first", func(t *testing.T) {
		f := newFixture(t)
		cause := errors.New("caller gave up")
		ctx, cancel := context.WithCancelCause(t.Context())
		cancel(cause)
		if _, err := f.start(ctx); err != cause {
			t.Fatalf("StartSend = %v, want the cause", err)
		}
		f.mustStart(t)
	})
}

func TestKill(t *testing.T) {
	t.Run("closes, removes and reports true", func(t *testing.T) {
		f := newFixture(t)
		if ok, err := f.svc.Kill(t.Context(), f.owner, f.id, ""); !ok || err != nil {
			t.Fatalf("Kill = %v, %v; want true", ok, err)
		}
		wantReasons(t, f.sess, "model request")
		_, err := f.svc.Read(f.owner, f.id, termapi.ReadRequest{})
		wantErr(t, err, termapi.ErrNoSession, "unknown PTY session "+f.id)
		_, err = f.svc.Kill(t.Context(), f.owner, f.id, "")
		wantErr(t, err, termapi.ErrNoSession, "")
		if f.svc.HasActivity(f.owner) || len(f.svc.List(f.owner)) != 0 {
			t.Fatal("a killed session is still activity")
		}
	})

	t.Run("concurrent kills share one close", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t)
			gate := f.sess.gateClose()
			type result struct {
				ok  bool
				err error
			}
			kill := func(reason string) <-chan result {
				c := make(chan result, 1)
				go func() {
					ok, err := f.svc.Kill(t.Context(), f.owner, f.id, reason)
					c <- result{ok, err}
				}()
				return c
			}
			first := kill("first")
			synctest.Wait()

			closing := fmt.Sprintf("PTY session %s is closing", f.id)
			_, err := f.start(t.Context())
			wantErr(t, err, termapi.ErrSessionClosing, closing)
			_, err = f.svc.Read(f.owner, f.id, termapi.ReadRequest{})
			wantErr(t, err, termapi.ErrSessionClosing, closing)
			_, err = f.svc.Signal(t.Context(), f.owner, f.id, termapi.SIGINT)
			wantErr(t, err, termapi.ErrSessionClosing, closing)
			if len(f.svc.List(f.owner)) != 1 || !f.svc.HasActivity(f.owner) {
				t.Fatal("a closing session must stay listed and count as activity")
			}

			second := kill("second")
			synctest.Wait()
			close(gate)
			if r := await(t, first); !r.ok || r.err != nil {
				t.Fatalf("first Kill = %+v, want true", r)
			}
			if r := await(t, second); r.ok || r.err != nil {
				t.Fatalf("joined Kill = %+v, want false and no error", r)
			}
			wantReasons(t, f.sess, "first")
			_, err = f.svc.Read(f.owner, f.id, termapi.ReadRequest{})
			wantErr(t, err, termapi.ErrNoSession, "")
		})
	})

	t.Run("a failed close keeps the session for a retry", func(t *testing.T) {
		f := newFixture(t)
		f.sess.failClose(errClose)
		ok, err := f.svc.Kill(t.Context(), f.owner, f.id, "test failure")
		if ok {
			t.Fatal("Kill = true for a failed close")
		}
		wantErr(t, err, errClose, fmt.Sprintf("close PTY session %s: close failed", f.id))
		if len(f.svc.List(f.owner)) != 1 {
			t.Fatal("a session whose close failed must stay listed")
		}
		if _, err := f.svc.Read(f.owner, f.id, termapi.ReadRequest{}); err != nil {
			t.Fatalf("Read after a failed close: %v", err)
		}
		f.sess.failClose(nil)
		if ok, err := f.svc.Kill(t.Context(), f.owner, f.id, "retry"); !ok || err != nil {
			t.Fatalf("retry Kill = %v, %v; want true", ok, err)
		}
		wantReasons(t, f.sess, "test failure", "retry")
	})

	t.Run("a joined kill reports the shared failure", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t)
			gate := f.sess.gateClose()
			f.sess.failClose(errClose)
			errs := make(chan error, 2)
			for range 2 {
				go func() {
					_, err := f.svc.Kill(t.Context(), f.owner, f.id, "")
					errs <- err
				}()
			}
			synctest.Wait()
			close(gate)
			for range 2 {
				wantErr(t, await(t, errs), errClose, "")
			}
			wantReasons(t, f.sess, "model request")
		})
	})
}

// An owner's own cleanups run after it stopped being live: they may still
// kill its sessions, but not start sends.
func TestOwnerCleanupMayKill(t *testing.T) {
	f := newFixture(t)
	var sendErr, killErr error
	var killed bool
	if _, err := f.owner.Defer(func(ctx context.Context) error {
		_, sendErr = f.svc.StartSend(ctx, f.owner, f.id, termapi.SendRequest{})
		killed, killErr = f.svc.Kill(ctx, f.owner, f.id, "tool cleanup")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := f.owner.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantErr(t, sendErr, terminal.ErrOwnerNotLive, `PTY owner "agent" is not live`)
	if !killed || killErr != nil {
		t.Fatalf("Kill from the owner's cleanup = %v, %v; want true", killed, killErr)
	}
	wantReasons(t, f.sess, "tool cleanup")
}

func TestOwnerClose(t *testing.T) {
	t.Run("closes the owner's sessions and waits for them", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHost(t)
			owner := newOwner(t, h, "agent")
			other := newOwner(t, h, "other")
			b := &stubBackend{typ: "stub"}
			svc := newService(t, b)
			mustSpawn(t, svc, owner, "stub", "a")
			mustSpawn(t, svc, other, "stub", "b")
			mustSpawn(t, svc, owner, "stub", "c")
			gate := b.session(2).gateClose()

			closed := make(chan error, 1)
			go func() { closed <- owner.Close(t.Context()) }()
			synctest.Wait()
			select {
			case err := <-closed:
				t.Fatalf("owner close returned (%v) while a session was still closing", err)
			default:
			}
			if !svc.HasActivity(owner) {
				t.Fatal("a closing session is activity")
			}
			close(gate)
			if err := await(t, closed); err != nil {
				t.Fatal(err)
			}
			wantReasons(t, b.session(0), "PTY owner disposed")
			wantReasons(t, b.session(2), "PTY owner disposed")
			wantReasons(t, b.session(1))
			if svc.HasActivity(owner) || len(svc.List(owner)) != 0 {
				t.Fatal("the owner's sessions outlived its close")
			}
			if len(svc.List(other)) != 1 {
				t.Fatal("another owner's session was touched")
			}
		})
	})

	t.Run("a failed close is reported and retried by the service", func(t *testing.T) {
		f := newFixture(t)
		f.sess.failClose(errClose)
		err := f.owner.Close(t.Context())
		wantErr(t, err, errClose, "")
		if !strings.Contains(err.Error(), "failed to close 1 PTY session(s)") {
			t.Fatalf("owner close error = %q, want it to count the failures", err)
		}
		if !f.svc.HasActivity(f.owner) {
			t.Fatal("a session that failed to close is still activity")
		}
		f.sess.failClose(nil)
		if err := f.svc.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		wantReasons(t, f.sess, "PTY owner disposed", "PTY service disposed")
		if f.svc.HasActivity(f.owner) {
			t.Fatal("activity remains after the service closed")
		}
	})
}

func TestServiceClose(t *testing.T) {
	t.Run("closes every owner's sessions", func(t *testing.T) {
		h := newHost(t)
		owner := newOwner(t, h, "agent")
		other := newOwner(t, h, "other")
		b := &stubBackend{typ: "stub"}
		svc := newService(t, b)
		first := mustSpawn(t, svc, owner, "stub", "")
		mustSpawn(t, svc, other, "stub", "")
		if ok, err := svc.Kill(t.Context(), owner, first.ID, ""); !ok || err != nil {
			t.Fatalf("Kill = %v, %v", ok, err)
		}
		mustSpawn(t, svc, owner, "stub", "")

		if err := svc.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		wantReasons(t, b.session(0), "model request")
		wantReasons(t, b.session(1), "PTY service disposed")
		wantReasons(t, b.session(2), "PTY service disposed")

		_, err := svc.Spawn(t.Context(), owner, terminal.SpawnRequest{Type: "stub"})
		wantErr(t, err, terminal.ErrServiceClosing, "PTY service is closing")
		_, err = svc.RegisterBackend(&stubBackend{typ: "late"})
		wantErr(t, err, terminal.ErrServiceClosing, "")
		if got := svc.Backends(); len(got) != 0 {
			t.Fatalf("Backends after close = %v", got)
		}
		if err := svc.Close(t.Context()); err != nil {
			t.Fatalf("second Close = %v", err)
		}
		// The owner cleanup was removed: closing the owner now touches nothing.
		if err := owner.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		wantReasons(t, b.session(2), "PTY service disposed")
	})

	t.Run("attempts every session and clears the registries on failure", func(t *testing.T) {
		h := newHost(t)
		owner := newOwner(t, h, "agent")
		other := newOwner(t, h, "other")
		b := &stubBackend{typ: "stub"}
		svc := newService(t, b)
		mustSpawn(t, svc, owner, "stub", "")
		mustSpawn(t, svc, other, "stub", "")
		b.session(0).failClose(errClose)

		err := svc.Close(t.Context())
		wantErr(t, err, errClose, "")
		if !strings.Contains(err.Error(), "failed to close 1 PTY session(s)") {
			t.Fatalf("Close error = %q, want it to count the failures", err)
		}
		wantReasons(t, b.session(0), "PTY service disposed")
		wantReasons(t, b.session(1), "PTY service disposed")
		if svc.HasActivity(owner) || len(svc.List(owner)) != 0 || len(svc.Backends()) != 0 {
			t.Fatal("registries survived a failed close")
		}
		if again := svc.Close(t.Context()); again != err {
			t.Fatalf("second Close = %v, want the first result", again)
		}
	})

	t.Run("joins a kill in progress", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t)
			gate := f.sess.gateClose()
			killed := make(chan bool, 1)
			go func() {
				ok, _ := f.svc.Kill(t.Context(), f.owner, f.id, "")
				killed <- ok
			}()
			synctest.Wait()
			closed := make(chan error, 1)
			go func() { closed <- f.svc.Close(t.Context()) }()
			synctest.Wait()
			close(gate)
			if err := await(t, closed); err != nil {
				t.Fatal(err)
			}
			if !await(t, killed) {
				t.Fatal("the kill that ran the close should report true")
			}
			wantReasons(t, f.sess, "model request")
		})
	})
}

// Closing the owner while the service is closing waits for the service.
func TestOwnerCloseDuringServiceClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		gate := f.sess.gateClose()
		serviceClosed := make(chan error, 1)
		go func() { serviceClosed <- f.svc.Close(t.Context()) }()
		synctest.Wait()
		ownerClosed := make(chan error, 1)
		go func() { ownerClosed <- f.owner.Close(t.Context()) }()
		synctest.Wait()
		select {
		case err := <-ownerClosed:
			t.Fatalf("owner close returned (%v) while its session was still closing", err)
		default:
		}
		close(gate)
		if err := await(t, serviceClosed); err != nil {
			t.Fatal(err)
		}
		if err := await(t, ownerClosed); err != nil {
			t.Fatal(err)
		}
		if got := f.sess.closeReasons(); !slices.Equal(got, []string{"PTY service disposed"}) {
			t.Fatalf("close reasons = %q", got)
		}
	})
}
