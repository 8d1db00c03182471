package terminal_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// How the backend answers once a pending spawn has been aborted.
type lateOutcome int

const (
	lateSession        lateOutcome = iota // a session, which must be rolled back
	lateFailingSession                    // a session whose rollback close fails
	lateOwnError                          // an error of the backend's own
	lateCleanupError                      // a *CleanupError: something survived
)

var (
	errRollback = errors.New("rollback close failed")
	errSurvived = errors.New("a process survived the cleanup")
)

// outcome builds the backend's late answer; cause is the cause its context
// ended with.
func (o lateOutcome) outcome(cause error) (spawnOutcome, *stubSession) {
	switch o {
	case lateSession:
		s := newStubSession()
		return spawnOutcome{session: s}, s
	case lateFailingSession:
		s := newStubSession()
		s.failClose(errRollback)
		return spawnOutcome{session: s}, s
	case lateOwnError:
		return spawnOutcome{err: errors.New("backend noticed the abort")}, nil
	default:
		return spawnOutcome{err: &termapi.CleanupError{StartErr: cause, CleanupErr: errSurvived}}, nil
	}
}

// retained is the failure a later disposal must report, if any.
func (o lateOutcome) retained() error {
	switch o {
	case lateFailingSession:
		return errRollback
	case lateCleanupError:
		return errSurvived
	}
	return nil
}

var lateOutcomes = []struct {
	name    string
	outcome lateOutcome
}{
	{"late session", lateSession},
	{"rollback fails", lateFailingSession},
	{"backend error", lateOwnError},
	{"cleanup error", lateCleanupError},
}

// startPending starts a spawn whose backend blocks, and returns the
// backend's context and the channel the spawn's error arrives on.
func startPending(t *testing.T, svc *terminal.Service, gate *gatedSpawn, ctx context.Context, owner *host.Owner) (context.Context, <-chan error) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		_, err := svc.Spawn(ctx, owner, terminal.SpawnRequest{Type: "stub", Name: "main"})
		errc <- err
	}()
	return await(t, gate.started), errc
}

func wantReasons(t *testing.T, s *stubSession, want ...string) {
	t.Helper()
	if s == nil {
		return
	}
	if got := s.closeReasons(); !slices.Equal(got, want) {
		t.Fatalf("close reasons = %q, want %q", got, want)
	}
}

// The caller gives up while the backend is still starting: the spawn
// returns the caller's cause itself, whatever the backend answers, and a
// late session is rolled back. Cleanup failures stay owner activity until
// the next disposal reports them.
func TestSpawnCallerCancels(t *testing.T) {
	for _, tc := range lateOutcomes {
		for _, disposal := range []string{"owner", "service"} {
			t.Run(tc.name+"/reported by "+disposal, func(t *testing.T) {
				h := newHost(t)
				owner := newOwner(t, h, "agent")
				gate := newGatedSpawn()
				svc := newService(t, &stubBackend{typ: "stub", spawn: gate.spawn})

				cause := errors.New("caller gave up")
				ctx, cancel := context.WithCancelCause(t.Context())
				backendCtx, errc := startPending(t, svc, gate, ctx, owner)
				cancel(cause)
				await(t, backendCtx.Done())
				if got := context.Cause(backendCtx); got != cause {
					t.Fatalf("backend context cause = %v, want the caller's cause", got)
				}
				outcome, late := tc.outcome.outcome(cause)
				gate.release <- outcome

				if err := await(t, errc); err != cause {
					t.Fatalf("Spawn error = %v, want the caller's cause itself", err)
				}
				wantReasons(t, late, "PTY spawn rolled back")
				if !owner.Live() {
					t.Fatal("the owner should stay live")
				}
				retained := tc.outcome.retained()
				if got := svc.HasActivity(owner); got != (retained != nil) {
					t.Fatalf("HasActivity = %v, want %v", got, retained != nil)
				}
				if got := svc.List(owner); len(got) != 0 {
					t.Fatalf("List = %+v, want no published session", got)
				}

				var err error
				if disposal == "owner" {
					err = owner.Close(t.Context())
				} else {
					err = svc.Close(t.Context())
				}
				if retained == nil {
					if err != nil {
						t.Fatalf("%s close: %v", disposal, err)
					}
				} else if !errors.Is(err, retained) {
					t.Fatalf("%s close error = %v, want it to report %v", disposal, err, retained)
				}
				if svc.HasActivity(owner) {
					t.Fatal("activity remains after the failure was reported")
				}
			})
		}
	}
}

// The owner or the service goes away while the backend is starting: the
// backend's context ends with a cause saying which, the disposal waits for
// the spawn to settle and roll back, and the spawn fails with that cause.
func TestSpawnLifecycleAborts(t *testing.T) {
	for _, lc := range []struct {
		name    string
		target  error
		dispose func(ctx context.Context, svc *terminal.Service, owner *host.Owner) error
	}{
		{"owner closes", terminal.ErrOwnerNotLive, func(ctx context.Context, _ *terminal.Service, o *host.Owner) error { return o.Close(ctx) }},
		{"service closes", terminal.ErrServiceClosing, func(ctx context.Context, s *terminal.Service, _ *host.Owner) error { return s.Close(ctx) }},
	} {
		for _, tc := range lateOutcomes {
			t.Run(lc.name+"/"+tc.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					h := newHost(t)
					owner := newOwner(t, h, "agent")
					gate := newGatedSpawn()
					svc := newService(t, &stubBackend{typ: "stub", spawn: gate.spawn})
					backendCtx, errc := startPending(t, svc, gate, t.Context(), owner)

					disposed := make(chan error, 1)
					go func() { disposed <- lc.dispose(t.Context(), svc, owner) }()
					await(t, backendCtx.Done())
					cause := context.Cause(backendCtx)
					if !errors.Is(cause, lc.target) {
						t.Fatalf("backend context cause = %v, want %v", cause, lc.target)
					}
					synctest.Wait()
					select {
					case err := <-disposed:
						t.Fatalf("disposal returned (%v) before the pending spawn settled", err)
					default:
					}

					outcome, late := tc.outcome.outcome(cause)
					gate.release <- outcome
					spawnErr := await(t, errc)
					disposeErr := await(t, disposed)

					wantReasons(t, late, "PTY spawn rolled back")
					retained := tc.outcome.retained()
					if tc.outcome == lateFailingSession {
						// Nobody else will hear of the rollback failure in
						// time: the spawn reports both.
						wantErr(t, spawnErr, lc.target, "")
						wantErr(t, spawnErr, errRollback, "")
						if want := "PTY spawn and rollback both failed: "; !strings.HasPrefix(spawnErr.Error(), want) {
							t.Fatalf("Spawn error = %q, want it to start with %q", spawnErr, want)
						}
					} else if spawnErr != cause {
						t.Fatalf("Spawn error = %v, want the abort cause itself (%v)", spawnErr, cause)
					}
					if retained == nil {
						if disposeErr != nil {
							t.Fatalf("disposal: %v", disposeErr)
						}
					} else if !errors.Is(disposeErr, retained) {
						t.Fatalf("disposal error = %v, want it to report %v", disposeErr, retained)
					}
					if svc.HasActivity(owner) {
						t.Fatal("activity remains after disposal")
					}
				})
			})
		}
	}
}

// A spawn whose owner starts closing while the backend runs is refused even
// when the backend ignores its context and returns a session.
func TestSpawnOwnerClosedMeanwhile(t *testing.T) {
	h := newHost(t)
	owner := newOwner(t, h, "agent")
	var sess *stubSession
	svc := newService(t, &stubBackend{typ: "stub", spawn: func(context.Context, termapi.SpawnSpec) (termapi.Session, error) {
		// The owner starts closing while the backend runs; its cleanups
		// cannot finish before this spawn has settled.
		go func() { _ = owner.Close(context.Background()) }()
		<-owner.Done()
		sess = newStubSession()
		return sess, nil
	}})
	_, err := svc.Spawn(t.Context(), owner, terminal.SpawnRequest{Type: "stub"})
	wantErr(t, err, terminal.ErrOwnerNotLive, `PTY owner "agent" is not live`)
	wantReasons(t, sess, "PTY spawn rolled back")
	if err := owner.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// An owner close that runs out of time waiting for a pending spawn still
// closes the owner's published sessions, as a service close does; the spawn
// settles later and a failure of its rollback is reported by the service.
func TestOwnerCloseGivesUpOnPendingSpawn(t *testing.T) {
	h := newHost(t)
	owner := newOwner(t, h, "agent")
	gate := newGatedSpawn()
	published := newStubSession()
	svc := newService(t, &stubBackend{typ: "stub", spawn: func(ctx context.Context, spec termapi.SpawnSpec) (termapi.Session, error) {
		if spec.Name == "pending" {
			return gate.spawn(ctx, spec)
		}
		return published, nil
	}})
	// Should the test fail early, the pending spawn must not hold up the
	// service's close.
	t.Cleanup(func() {
		select {
		case gate.release <- spawnOutcome{err: errors.New("test over")}:
		default:
		}
	})
	mustSpawn(t, svc, owner, "stub", "main")
	errc := make(chan error, 1)
	go func() {
		_, err := svc.Spawn(t.Context(), owner, terminal.SpawnRequest{Type: "stub", Name: "pending"})
		errc <- err
	}()
	await(t, gate.started)

	ctx, cancel := context.WithCancel(t.Context())
	cancel() // no time at all to wait for the pending spawn
	if err := owner.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("owner close = %v, want it to report the wait it gave up", err)
	}
	wantReasons(t, published, "PTY owner disposed")
	if !svc.HasActivity(owner) {
		t.Fatal("the pending spawn is still owner activity")
	}

	outcome, late := lateFailingSession.outcome(nil)
	gate.release <- outcome
	wantErr(t, await(t, errc), terminal.ErrOwnerNotLive, "")
	wantReasons(t, late, "PTY spawn rolled back")
	if err := svc.Close(t.Context()); !errors.Is(err, errRollback) {
		t.Fatalf("service close = %v, want it to report %v", err, errRollback)
	}
}
