// Package backendkit holds the parts of a terminal session that do not
// depend on how the shell is reached, for the backends that implement
// terminal.Session: the state behind a terminal.Send (its pending lines,
// Output, Wait and settling) and paging of the scrollback.
//
// The shell backend (plugins/terminal-bash) and the in-band engine behind
// the SSH and Docker backends (plugins/terminal/inband) are built on it. A
// third-party backend can be too.
//
// Nothing here has a lock of its own. A Send is guarded by its session's
// lock, which it is given at Init: Output and Wait take it, every other
// method expects the caller to hold it.
package backendkit
