package host

import (
	"context"
	"maps"
	"sync"
)

// Call notes are facts a tool states about a call besides its result,
// for whoever records calls (an audit log): the command's exit status, how
// it ended. The model never sees them. A front that wants them gives the
// call a context from WithNotes; a tool states them with Note, which does
// nothing when nobody listens.

type notesKey struct{}

// Notes collects a call's notes. Safe for concurrent use.
type Notes struct {
	mu sync.Mutex
	m  map[string]any
}

// WithNotes returns a context whose calls' notes n collects.
func WithNotes(ctx context.Context) (context.Context, *Notes) {
	n := &Notes{}
	return context.WithValue(ctx, notesKey{}, n), n
}

// Note states a fact about the call ctx belongs to: key "exitCode" with
// the command's exit status, "ended" with how it ended when that is not
// plain completion ("timeout", "interrupted", "shell exited"). A later
// note of a key replaces an earlier one.
func Note(ctx context.Context, key string, value any) {
	n, _ := ctx.Value(notesKey{}).(*Notes)
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil {
		n.m = make(map[string]any)
	}
	n.m[key] = value
}

// Map returns a copy of the notes so far.
func (n *Notes) Map() map[string]any {
	n.mu.Lock()
	defer n.mu.Unlock()
	return maps.Clone(n.m)
}

// A front can also watch a call's output as it comes (dsh repl prints it
// while the command runs): it gives the call a context from WithOutput,
// and a tool passes its output to Output as it reads it, complete lines at
// a time. The result stays what the model sees.

type outputKey struct{}

// WithOutput returns a context whose calls' output, as the tool reads it,
// goes to watch. watch must be quick, and safe to call from another
// goroutine than the caller's.
func WithOutput(ctx context.Context, watch func(text string)) context.Context {
	return context.WithValue(ctx, outputKey{}, watch)
}

// Output passes text, output of the call ctx belongs to, to whoever
// watches it; nothing when nobody does.
func Output(ctx context.Context, text string) {
	if watch, _ := ctx.Value(outputKey{}).(func(string)); watch != nil {
		watch(text)
	}
}
