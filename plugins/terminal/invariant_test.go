package terminal_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/invariant"
	"github.com/dshdev/dsh/plugins/terminal"
)

func runChecks(t *testing.T, checks map[string]func(context.Context) error) error {
	t.Helper()
	var errs []error
	for _, check := range checks {
		if err := check(context.Background()); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// The invariants hold through ordinary use, and catch a service whose
// owner cleanup was skipped (a deliberately broken build): the sessions of
// a closed owner are left with nobody to close them.
func TestInvariantsCatchAnOwnersSessionsLeftBehind(t *testing.T) {
	h := newHost(t)
	svc := newService(t, &stubBackend{typ: "shell"})
	checks := svc.Invariants()

	ok := newOwner(t, h, "ok")
	mustSpawn(t, svc, ok, "shell", "")
	if err := runChecks(t, checks); err != nil {
		t.Fatalf("a healthy service: %v", err)
	}
	if err := ok.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := runChecks(t, checks); err != nil {
			t.Fatalf("after an owner's ordinary close: %v", err)
		}
	}

	restore := terminal.SkipOwnerCleanup()
	defer restore()
	broken := newOwner(t, h, "broken")
	info := mustSpawn(t, svc, broken, "shell", "")
	if err := broken.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	runChecks(t, checks) // the first sight may be an owner mid-close
	err := runChecks(t, checks)
	if err == nil || !strings.Contains(err.Error(), "session "+info.ID+" of owner \"broken\" outlives its owner") {
		t.Fatalf("the skipped cleanup was not caught: %v", err)
	}
}

// The checks run in the invariants service, which finds them on the
// plugin's instance, after every tool call.
func TestInvariantsServiceRunsTheChecks(t *testing.T) {
	d, err := host.ParseDeployment("inv.yaml", []byte("- id: invariant\n  name: invariant\n- id: terminal\n  name: terminal\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Load(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	svc, err := host.Lookup[*invariant.Service](h, invariant.ServiceKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(svc.Packages(), " "); got != "github.com/dshdev/dsh/plugins/terminal" {
		t.Errorf("packages %q", got)
	}
}

// An id that comes back naming another session is caught.
func TestInvariantsCatchAnIDPublishedTwice(t *testing.T) {
	h := newHost(t)
	svc := newService(t, &stubBackend{typ: "shell"})
	checks := svc.Invariants()
	info := mustSpawn(t, svc, newOwner(t, h, "agent"), "shell", "")
	if err := runChecks(t, checks); err != nil {
		t.Fatal(err)
	}
	terminal.RepublishID(svc, info.ID)
	if err := runChecks(t, checks); err == nil || !strings.Contains(err.Error(), "session id "+info.ID+" was published twice") {
		t.Fatalf("not caught: %v", err)
	}
}
