package backendkit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

func TestSafeName(t *testing.T) {
	for in, want := range map[string]string{
		"pty-1":       "pty-1",
		"a/b c":       "a_b_c",
		"..":          "__",
		".":           "_",
		"":            "_",
		"x..y":        "x..y",
		"ü\x00;$(id)": "_____id_",
	} {
		if got := SafeName(in); got != want {
			t.Errorf("SafeName(%q) = %q, want %q", in, got, want)
		}
	}
}

type fakeSession struct {
	closed chan string
	err    error
}

func (f *fakeSession) Close(ctx context.Context, reason string) error {
	f.closed <- reason
	return f.err
}

func TestSessions(t *testing.T) {
	var r Sessions[*fakeSession]
	a := &fakeSession{closed: make(chan string, 1)}
	b := &fakeSession{closed: make(chan string, 1), err: errors.New("stuck")}
	gone := &fakeSession{closed: make(chan string, 1)}
	for _, s := range []*fakeSession{a, b, gone} {
		if !r.Add(s) {
			t.Fatal("Add before Close refused")
		}
	}
	r.Remove(gone)
	if n := len(r.List()); n != 2 {
		t.Fatalf("List has %d sessions, want 2", n)
	}
	if r.Closed() {
		t.Fatal("Closed before Close")
	}
	if err := r.Close(context.Background(), "unload"); err == nil || err.Error() != "stuck" {
		t.Fatalf("Close = %v, want the one session's error", err)
	}
	if <-a.closed != "unload" || <-b.closed != "unload" || len(gone.closed) != 0 {
		t.Fatal("Close did not close exactly the live sessions with its reason")
	}

	late := &fakeSession{closed: make(chan string, 1)}
	if !r.Closed() || r.Add(late) {
		t.Fatal("Add after Close kept the session")
	}
	errDown := errors.New("shut down")
	if err := Refuse(context.Background(), late, time.Second, errDown); err != errDown || len(late.closed) != 1 {
		t.Fatalf("Refuse = %v, want %v and the session closed", err, errDown)
	}
	<-late.closed
	late.err = errors.New("kill failed")
	err := Refuse(context.Background(), late, time.Second, errDown)
	var ce *termapi.CleanupError
	if !errors.As(err, &ce) || !errors.Is(err, errDown) {
		t.Fatalf("Refuse of a session that does not close = %v, want a CleanupError carrying %v", err, errDown)
	}
}
