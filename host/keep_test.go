package host

import (
	"context"
	"slices"
	"testing"
)

// TestOwnerDetach: Detach runs the OnDetach hooks first, newest first,
// while the owner is still live, then closes it with cleanups that see
// Detaching; Close runs no OnDetach hook.
func TestOwnerDetach(t *testing.T) {
	h := emptyHost(t)
	defer h.Close(context.Background())
	for _, detach := range []bool{true, false} {
		o, err := h.NewOwner("agent", ".")
		if err != nil {
			t.Fatal(err)
		}
		var events []string
		for _, name := range []string{"a", "b"} {
			o.OnDetach(func(context.Context) error {
				events = append(events, "hook "+name+" live="+map[bool]string{true: "yes", false: "no"}[o.Live()])
				return nil
			})
		}
		if _, err := o.Defer(func(ctx context.Context) error {
			events = append(events, "cleanup detaching="+map[bool]string{true: "yes", false: "no"}[Detaching(ctx)])
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		end := o.Close
		want := []string{"cleanup detaching=no"}
		if detach {
			end = o.Detach
			want = []string{"hook b live=yes", "hook a live=yes", "cleanup detaching=yes"}
		}
		if err := end(t.Context()); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(events, want) {
			t.Errorf("detach %v: events %q, want %q", detach, events, want)
		}
	}
}
