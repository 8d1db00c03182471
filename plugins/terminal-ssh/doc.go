// Package terminalssh is the "ssh" terminal backend: an interactive bash on
// a remote machine, on the PTY of an SSH session (golang.org/x/crypto/ssh).
// It implements termapi.Backend; its sessions implement termapi.Session
// and termapi.Executor, so the bash tool can run on them. The package is
// the backend only; a plugin wrapper registers it.
//
// # The session
//
// Every session has its own SSH connection, authenticated with one private
// key (identityFile) and checked strictly against a known_hosts file: a
// host that is not listed, or offers another key than the one listed, is
// refused (ErrUnknownHostKey, and ErrHostKeyChanged for the second).
// Connections are never re-established: a connection that drops, or stops
// answering keepalives, is the shell's exit (Status exited, code -1), and
// the caller starts a new session.
//
// The connection asks for one PTY (TERM=dumb, 40×160, no echo, ISIG on)
// and runs `exec bash --noediting --noprofile --norc -i` through the remote
// user's login shell. Nothing else is requested: no agent or X11
// forwarding, no environment variable (Setenv is never called), so nothing
// of this host, secrets included, reaches the remote side. The remote
// environment is the one the server gives its logins.
//
// Besides the session's own goroutines (see package inband), a keepalive
// goroutine probes the connection, and one reads the stdin probe's answers.
//
// # The shell protocol
//
// Everything above the connection is package inband: the plumbing typed at
// startup, the per-command nonce and markers, readiness, output and
// signals (^C and ^Z typed into the PTY).
//
// # The stdin proof
//
// Once the shell is up, a second session of the same connection runs
// inband's probe (bash, reading the remote /proc with builtins only) beside
// it: a program blocked reading the terminal is proven so, as locally,
// within tens of milliseconds, and the session reports InputProof. A host
// without Linux's /proc (or bash) refuses the probe; its sessions report no
// proof, and a program waiting for input settles by silence
// (idleSilenceMs). The probe ends with the connection.
//
// # Close
//
// Close closes the SSH session and connection. The server then closes the
// PTY, the kernel sends SIGHUP to the shell, and bash passes it on to its
// jobs. Close returns once every goroutine of the session and of its
// connection has ended. What ignores SIGHUP or left the shell's session
// (nohup, setsid) survives on the remote host, as after any SSH logout:
// nothing on this side can see it, let alone wait for it. Concurrent calls
// share one close.
//
// # Limits
//
//   - The shell must be bash, and stay the shell: `exec bash` replaces it
//     with one without the plumbing, `set -o emacs` (or vi) makes bash
//     reset its input, and a function named `builtin` shadows what the
//     plumbing calls. Sends then settle by silence or time out.
//   - Identity files with a passphrase are refused: nobody is there to type
//     it. There is no ssh-agent, no password or keyboard-interactive
//     authentication, no jump host and no ssh_config.
package terminalssh
