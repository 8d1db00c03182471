package host

import "context"

// Instance is a loaded plugin's instance: what its Apply returned, and the
// deployment entry it came from.
type Instance struct {
	// Entry is the address of the plugin's deployment entry.
	Entry string
	// Plugin is the registered plugin name.
	Plugin string
	// Value is what Apply returned.
	Value any
}

// The optional interfaces the host and the plugins that observe others
// look for on an instance.
type (
	// Closer is an instance that must be closed when its plugin unloads.
	// Close runs after the cleanups the plugin deferred, so its
	// registrations are gone by then; its error is the unload's.
	Closer interface {
		Close(ctx context.Context) error
	}

	// Checker is an instance with runtime invariants: named checks over
	// its observable state, which the invariants service runs after every
	// tool call. Invariants is called once per instance and its checks
	// kept, so a check may remember what it saw between runs. A check
	// returns nil while the invariant holds, or an error saying what it
	// saw; it must be safe to call from any goroutine, and cheap.
	Checker interface {
		Invariants() map[string]func(ctx context.Context) error
	}

	// Holder is an instance that holds processes for owners (the
	// terminals service: their shells). Holding lists them for one owner,
	// for an operator's listing of sessions (dsh sessions).
	Holder interface {
		Holding(owner *Owner) []Held
	}

	// Interrupter is an instance that can interrupt what runs for an
	// owner the way a person's Ctrl-C in a terminal does (the terminals
	// service: SIGINT to each shell's foreground job), leaving its shells
	// as they are. dsh repl uses it.
	Interrupter interface {
		Interrupt(ctx context.Context, owner *Owner) error
	}
)

// Held is one thing an instance holds for an owner.
type Held struct {
	// What it is: "shell session pty-3 (shell)".
	What string `json:"what"`
	// PID is its top process on this machine; 0 when it has none here (a
	// shell on another machine, or in a container of a remote daemon).
	PID int `json:"pid,omitempty"`
}
