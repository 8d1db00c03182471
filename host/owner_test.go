package host

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func emptyHost(t *testing.T) *Host {
	t.Helper()
	h, err := Load(t.Context(), &Deployment{Source: "empty"}, WithRegistry(NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestOwnerCleanup(t *testing.T) {
	h := emptyHost(t)
	defer h.Close(context.Background())
	o, err := h.NewOwner("agent", ".")
	if err != nil {
		t.Fatal(err)
	}
	if !o.Live() || o.Workdir() == "." || !strings.HasPrefix(o.Workdir(), "/") {
		t.Fatalf("owner live=%v workdir=%q", o.Live(), o.Workdir())
	}
	if _, err := h.NewOwner("agent", "."); !errors.Is(err, ErrOwnerExists) {
		t.Fatalf("duplicate live owner: %v", err)
	}
	var order []string
	for _, name := range []string{"a", "b", "c"} {
		if _, err := o.Defer(func(context.Context) error {
			order = append(order, name)
			if name == "b" {
				return errors.New("b failed")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	remove, err := o.Defer(func(context.Context) error { order = append(order, "removed"); return nil })
	if err != nil {
		t.Fatal(err)
	}
	remove()

	err = o.Close(t.Context())
	if !slices.Equal(order, []string{"c", "b", "a"}) {
		t.Fatalf("cleanup order %q", order)
	}
	if err == nil || err.Error() != `close owner "agent": b failed` {
		t.Fatalf("close error: %v", err)
	}
	if o.Live() {
		t.Fatal("closed owner is live")
	}
	select {
	case <-o.Done():
	default:
		t.Fatal("Done not closed")
	}
	if _, err := o.Defer(func(context.Context) error { return nil }); !errors.Is(err, ErrOwnerClosed) {
		t.Fatalf("Defer after close: %v", err)
	}
	if err2 := o.Close(t.Context()); err2 != err {
		t.Fatalf("second close: %v", err2)
	}
	// The id is free again once the owner has closed.
	o2, err := h.NewOwner("agent", ".")
	if err != nil {
		t.Fatal(err)
	}
	if o2 == o {
		t.Fatal("same owner object")
	}
}

func TestHostCloseClosesOwnersFirst(t *testing.T) {
	rec := &recorder{}
	h, err := Load(t.Context(), parse(t, "- {id: p, name: svc-alpha}\n"), WithRegistry(testRegistry(rec)))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"one", "two"} {
		o, err := h.NewOwner(id, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := o.Defer(func(context.Context) error { rec.add("owner closed"); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := []string{"start p", "owner closed", "owner closed", "stop p"}
	if got := rec.list(); !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	if _, err := h.NewOwner("late", "."); !errors.Is(err, ErrClosed) {
		t.Fatalf("NewOwner after Close: %v", err)
	}
}

func TestOwnerCloseWaitsForConcurrentClose(t *testing.T) {
	h := emptyHost(t)
	defer h.Close(context.Background())
	o, err := h.NewOwner("slow", ".")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	entered := make(chan struct{})
	if _, err := o.Defer(func(context.Context) error {
		close(entered)
		<-release
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	first := make(chan error)
	go func() { first <- o.Close(context.Background()) }()
	<-entered
	second := make(chan error)
	go func() { second <- o.Close(context.Background()) }()
	select {
	case <-second:
		t.Fatal("second Close returned before the cleanup finished")
	default:
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
}

// Owner ids name their front and are never the same twice.
func TestNewOwnerID(t *testing.T) {
	seen := make(map[string]bool)
	for range 1000 {
		id := NewOwnerID("mcp")
		if !regexp.MustCompile(`^mcp-[a-z2-7]{16}$`).MatchString(id) || seen[id] {
			t.Fatalf("NewOwnerID = %q (seen before: %v)", id, seen[id])
		}
		seen[id] = true
	}
}
