// Package terminal is the `terminals` service: owner-fenced terminal
// sessions over named backends (plugin "terminal", service key
// "terminals"). The contract those backends implement is package termapi;
// the conformance kit every backend must pass is terminaltest. The plugin
// also loads backends served as executables of their own (LoadExternal).
//
// # Authority
//
// The service, not the caller, decides what a caller may touch.
//
//   - Ids. Every session gets an opaque id, "pty-" and 16 random
//     characters, minted before the backend starts: no id is ever used
//     twice, not by a failed spawn, not by a later dsh. Callers must not
//     parse ids. A session's name is optional display metadata, unique among
//     one owner's published and pending sessions, and never grants anything.
//   - Owner fencing. Every operation names its owner, and the fence compares
//     the owner's key (its id), which can outlive one owner object: an owner
//     with the same key reaches the session, until the first owner's
//     disposal has begun, after which its sessions are its own alone. A
//     session id held by a different owner is treated exactly like an id
//     that does not exist: both fail with ErrNoSession and the same text, so
//     nothing about other owners' sessions leaks. Spawn and StartSend, which start work, also require the owner to
//     be live (ErrOwnerNotLive once its Close has begun). Read, Signal, Kill,
//     List and HasActivity only require the identity, so that an owner's own
//     cleanups, which run after it stops being live, can still wind its
//     sessions down.
//   - One live send. A session has at most one send in flight. The service
//     holds the slot from StartSend until the holder observes the send settle
//     (Wait returns a result, or Output returns io.EOF); a second StartSend
//     meanwhile fails with ErrSendActive. The backend enforces the same rule
//     and may keep its slot longer (until its write and interrupt have
//     drained); its own ErrSendActive then surfaces unchanged.
//
// # Commands
//
// A session is a terminal: StartSend types into it and settles when the
// terminal looks ready. A session whose backend can also run a command as
// one unit says so (Capabilities.Exec): Exec hands the command to the shell
// and the backend learns from the shell itself, out of band, whether the
// command ran to its end and with which status (ExecResult). That is what a
// tool that runs commands needs, and what no program in the shell can
// fake; the bash tool requires it. Service.Exec fences Exec like StartSend,
// in the same slot, and fails with an error wrapping errors.ErrUnsupported
// for a session that cannot.
//
// # Interactive programs
//
// The tools on this service share what they need to know about programs
// that wait for input (interactive.go): AsksForSecret tells a program
// asking for a secret (a line read without echo, or, where the backend
// cannot see the terminal's settings, a prompt for a password), which the
// tools answer through the person at the client and never through the
// model; Handoff and Adopter let the bash tool hand a waiting command to
// the interactive terminal tools (plugin tool-terminal) in the same
// session.
//
// # Policy
//
// SetPolicy sets what an owner's spawns ask for: a sandbox mode, resource
// limits, a terminal size (termapi.Policy). Its confinement is fenced while
// the owner has sessions open or being created. A spawn whose session does
// not enforce what it asked for (Policy.Check against the session's
// capabilities) is refused and rolled back, whatever its backend said.
// A send that settles while the command still runs (a program waiting for
// input, silence) carries the command's state, and an empty StartSend then
// waits for the rest.
//
// # Spawn
//
// Spawn checks, in this order: the service is closing (ErrServiceClosing);
// the caller's context is already done (its cause, returned as is); the
// owner is not live (ErrOwnerNotLive); no backend of the requested type
// (ErrNoBackend); the name is taken by a published or pending session of
// the same owner (ErrDuplicateName). Only then is the id minted and the
// backend started. The first spawn of an owner also installs a cleanup on the
// owner (see Disposal).
//
// The backend's context ends when the caller's does, when the owner starts
// closing, or when the service starts closing; its cause says which (the
// caller's own cause, or an error wrapping ErrOwnerNotLive or
// ErrServiceClosing). When the backend returns, the same three are checked
// again in that order before the session is published, so a session never
// appears for a caller that gave up or an owner or service that went away.
// If a session was produced but not published, it is closed with reason
// "PTY spawn rolled back" before Spawn returns. A failed rollback, and a
// *CleanupError from the backend, mean something may still be running: they
// are retained, keep HasActivity true, and are reported by the next owner or
// service close.
//
// # Disposal and quiescence
//
// Nothing is reported closed before the backend says so: Kill, owner
// disposal and service disposal all return only after the backend's Close
// has returned, and concurrent closes of one session share a single backend
// Close. A close that fails leaves the session listed, so a later Kill or
// disposal can retry it.
//
// When an owner closes, its cleanup waits for the owner's pending spawns to
// settle (they were aborted the moment the owner stopped being live) and
// their rollbacks to finish, then closes all the owner's sessions with reason
// "PTY owner disposed" (even if its context ended that wait), and reports
// close failures together with any retained cleanup failure; what a spawn
// still pending leaves behind is reported by Service.Close. Service.Close (run when the plugin unloads) does the same
// for every owner with reason "PTY service disposed": later spawns fail with
// ErrServiceClosing, every session is attempted, failures are collected, and
// the registries are cleared even when something failed. It also removes the
// cleanups it installed on owners that outlive it.
package terminal
