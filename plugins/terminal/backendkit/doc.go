// Package backendkit holds the parts of a terminal backend that do not
// depend on how the shell is reached: the state behind a termapi.Send
// (Send), paging of the scrollback (ReadPage), the set of live sessions
// that a backend's Close ends (Sessions), and names derived from session
// ids (SafeName).
//
// The shell backend (plugins/terminal-bash) and the in-band engine behind
// the SSH and Docker backends (plugins/terminal/inband) are built on it. A
// third-party backend can be too.
//
// A Send has no lock of its own: it is guarded by its session's lock,
// which it is given at Init. Output and Wait take that lock; every other
// method of Send expects the caller to hold it.
package backendkit
