// Package backendkit is the engine that every terminal backend shares: all
// of a session that does not depend on how the shell is reached or how a
// wait for input is proven. The shell backend (plugins/terminal-bash: a
// PTY, a control channel, the /proc proofs) and the in-band engine behind
// the SSH and Docker backends (plugins/terminal/inband: markers in the
// stream) each keep only their transport and their proofs, and build the
// rest from here:
//
//   - Core: a session's name in errors, its screen and status, the gates
//     that decide whether a send or a command may start (Gate, ExecGate),
//     the bound of a send (Deadline), Resize's checks, and the Session
//     methods that are the same everywhere (Status, Read, Output).
//   - Screen: what the terminal has shown: the raw output with positions
//     (Raw), the line renderer that reads the same bytes after it, the
//     scrollback, and the lines no send has claimed yet.
//   - Send and Slot: the state behind a termapi.Send (pending lines,
//     Output, Wait, the settled result) and the one-send rule.
//   - Sessions, List, Find and Refuse: the live set that a backend's
//     Close ends, its List and Attach, and the refusal of a spawn that
//     finished after Close.
//   - Input, Nonce and SafeName: what a send types, a command's nonce,
//     names derived from session ids.
//
// A third-party backend can be built on it too.
//
// Nothing here has a lock of its own: a Core, a Screen, a Send and a Slot
// are guarded by their session's lock, which Core and Send are given at
// Init. Core.Status, Core.Read, Send.Output and Send.Wait take that lock;
// every other method expects the caller to hold it. Raw has its own lock,
// so that readers of the raw output never wait for the session's.
package backendkit
