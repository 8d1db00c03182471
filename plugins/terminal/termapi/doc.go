// Package termapi is the terminal contract: what a backend offers
// (Backend, Session, Send) and what travels across it (spawn specs,
// policies, capabilities, requests, results, statuses, and the errors
// callers branch on). It imports nothing of dsh, so that a backend, in
// process or served as an executable of its own (package backendplugin),
// links neither the host nor its deployment loader.
//
// # Capabilities are data
//
// A session says what it can do when it is spawned (Capabilities: commands
// as units with their exit status, raw output, resize, hand-over, the stdin
// proof, files written where its shell reads them, whether its shell reads
// this machine's files, and the sandbox and limits it runs under). Every call is on the
// Session itself; one it cannot serve fails with an error wrapping
// errors.ErrUnsupported. A capability added later is a new field, in the
// plugin protocol too, never a new interface: Unsupported and
// UnsupportedLister answer for a backend that embeds them.
//
// # One policy
//
// A spawn carries a Policy: sandbox mode, resource limits and the
// terminal's size. A backend refuses, before it starts anything, what it
// cannot enforce (Policy.Check against its sessions' capabilities); the
// terminals service checks the session it gets again, so a sandbox or a
// limit is never weakened in silence. The service fences the policy's
// confinement per owner while the owner has sessions. A limit below
// MinLimits is refused by every backend: no shell starts under it.
//
// # Limits and what a command leaves behind
//
// A session that enforces limits says, on each send's result, which of
// them its processes ran into while the send ran (SendResult.LimitsHit:
// the OOM killer ended one of them at the memory limit, a fork was refused
// at the pids limit), so a caller can tell the model in plain words. A
// session that can tell what a command started (Capabilities.EndCommand)
// ends it on request (Session.EndCommand): a caller that gives up on a
// command at a timeout then leaves no background job, daemon or fork bomb
// of it running, while the shell and earlier jobs are kept.
//
// # Identity
//
// A session's id is minted by the terminals service before the spawn, at
// random, so that it is never reused, not even by a later dsh; the owner's
// id is its key, which can outlive one dsh process. A backend that holds
// its sessions lists them (Backend.List) and hands them to another caller
// (Backend.Attach): that is how a restarted dsh finds what a keeper kept.
//
// # Raw output
//
// A session's raw bytes are a stream with positions (Session.Output, a
// Chunk at a time): the line renderer reads the same bytes in the same
// order, and a terminal emulator or a journal can read them too, each from
// its own position, resuming where it left off.
//
// The owner-fenced service that hands sessions to tools is package
// terminal; the engine backends share is backendkit (with screen and
// inband); the conformance kit every backend must pass is terminaltest.
package termapi
