package termapi

import (
	"context"
	"time"
)

// Backend starts terminal sessions of one type ("shell" for bash on a PTY).
// Backends register with the terminals service. The interface is plain data
// in and out and context-first, so it can sit behind a gRPC boundary
// (out-of-process backends): no callbacks, no shared host state.
type Backend interface {
	// Type is the registry name, e.g. "shell". Non-empty.
	Type() string
	// Spawn starts a session and returns once it is ready for its first
	// send. A backend refuses, before it starts anything, a policy it
	// cannot enforce (Policy.Check of what its sessions can do): a sandbox
	// or a limit is never weakened in silence. If ctx ends first, or
	// startup fails, nothing is left running; if the cleanup of a failed
	// start itself fails, the error is a *CleanupError.
	Spawn(ctx context.Context, spec SpawnSpec) (Session, error)
	// List describes the sessions the backend holds now, as it sees them.
	// A backend that outlives its caller (a keeper) is how a restarted
	// caller finds its sessions again. Errors wrap errors.ErrUnsupported
	// where the backend keeps no such list.
	List(ctx context.Context) ([]Info, error)
	// Attach hands session id to a caller that did not spawn it, or that
	// lost it. ErrNoSession for an id the backend does not hold; errors
	// wrap errors.ErrUnsupported where sessions cannot be handed over
	// (Capabilities.Attach is false).
	Attach(ctx context.Context, id string) (Session, error)
}

// SpawnSpec is what the service passes to Backend.Spawn.
type SpawnSpec struct {
	// SessionID is minted by the service before the spawn runs, unique
	// across restarts of dsh: the backend keeps it as the session's name
	// (List, Attach).
	SessionID string
	// OwnerID is the key of the owning agent: it can outlive one dsh
	// process (a named session), so a backend that lists its sessions
	// says whose each one is.
	OwnerID string
	// Cwd is the working directory of the session's first process; empty
	// means the backend's default.
	Cwd string
	// Name is optional display metadata.
	Name string
	// Policy is what the session must run under: its sandbox, its limits,
	// its terminal's size.
	Policy Policy
}

// Info describes a session a backend holds (Backend.List).
type Info struct {
	// ID is the session id the spawn was given.
	ID string
	// OwnerID and Name are those of the spawn.
	OwnerID string
	Name    string
	// PID is the top-level process id, or 0 when there is none.
	PID int
	// Status is the top-level process's state.
	Status Status
	// Capabilities are what the session can do.
	Capabilities Capabilities
	// Kept is what a keeper says of a session no caller holds (nil when
	// a caller holds it, or outside a keeper).
	Kept *Kept
}

// Kept describes a session its keeper holds for a caller that went away:
// what happened while none held it.
type Kept struct {
	// Since is when its last caller let it go or went away.
	Since time.Time
	// Held: another caller holds the session now; Attach waits until it
	// lets go.
	Held bool
	// Lost: the keeper itself ended (it was killed, or its machine
	// restarted) and the session with it. Attach hands over a session
	// whose shell has exited.
	Lost bool
	// Expired, with Lost: the keeper ended the session itself because no
	// caller took it back within its keep time, this long.
	Expired time.Duration
	// Unit is the work whose end no caller received (Session.Resume), or
	// nil.
	Unit *Unit
	// Output is how many bytes of output the keeper took in while no
	// caller held the session (the unit's included), in how many lines;
	// Dropped how many of those bytes it could not keep (past its bound,
	// the middle).
	Output, Lines, Dropped int64
}

// Unit is the last Exec (or typed send) of a kept session, whose end its
// caller did not receive.
type Unit struct {
	// Command is the Exec's command; empty for typed text.
	Command string
	// Ended: the unit has settled meanwhile (the command ran to its end,
	// the shell exited, or a program waits for input); Result says how.
	Ended  bool
	Result SendResult
}
