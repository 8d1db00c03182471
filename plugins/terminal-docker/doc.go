// Package terminaldocker is the "docker" terminal backend: an interactive
// bash per session in a container, through the Docker Engine API (the
// official Go client). Its sessions are inband.Sessions, so the bash tool
// runs on them. cmd/dsh-backend-docker serves it out of process, which
// keeps the container client out of dsh itself.
//
// # Containers
//
// With Image, every session gets a container of its own, created when the
// session starts and removed (forcibly, with whatever runs in it) when it
// closes. The container's own process is a bash that waits on a stdin
// nobody writes, under docker-init, which reaps the orphans of background
// jobs; the session's shell is an exec beside it. The workspace (the
// configured one, else the spawn's working directory) is bind-mounted at
// MountPath, where the shell starts. The network mode defaults to none:
// only loopback. Memory (without swap beyond it), CPUs and a pids limit
// are the kernel's, set through the container's cgroup.
//
// With Container, sessions are execs in an existing, running container,
// which is never removed. Closing a session closes the exec's stream
// (the runtime hangs its terminal up, and bash passes SIGHUP on to its
// jobs) and, where the shell's host pid is known, kills what is left of
// the shell's session (a job that ignored SIGHUP).
//
// # Kept containers
//
// Served by a keeper (NewKept, which cmd/dsh-backend-docker uses when
// backendplugin.KeeperOf says so), the backend holds its sessions' exec
// streams and containers past dsh. Its containers are labelled with the
// keeper's base path and process identity (dsh.keeper,
// dsh.keeper.process), and NewKept removes those of the same base whose
// process is gone: a keeper that was killed leaves its containers running,
// and the next keeper of the entry removes them. Existing containers are
// never removed.
//
// # The shell
//
// The exec runs `bash --noediting --noprofile --norc -i` with a TTY of
// 40×160 and TERM=dumb; nothing of dsh's environment is passed, only the
// config's Env. Docker gives the TTY echo on: the startup turns it off
// with stty, where the image has it; otherwise every typed line's echo is
// recognised by its nonce and removed. Detaching is mapped to the NUL
// byte, which no send can type.
//
// # Readiness and the stdin proof
//
// Readiness is package inband's protocol. Where the daemon is on this
// machine (a unix socket), the exec's pid is looked up here, and taken only
// if that process is in the container's cgroup: the daemon's pid namespace
// is then this one. With it, a send whose foreground job blocks reading the
// terminal settles as stdin_read within milliseconds, as with the local
// backend, through /proc (the shell's stat line names its terminal and
// foreground group). The shell itself in the foreground counts when it
// blocks in another read than its prompt's (a read builtin), whose
// signature is learnt right after startup. Reading the container's
// processes from here needs ptrace access: dsh as root, or a container
// user that is dsh's own uid. Without it, or with a remote daemon, the
// proof comes from inside: an exec beside the shell, as its user, runs
// inband's probe on the container's /proc (bash builtins only), as over
// SSH. An image without bash, or a container without /proc, has no proof,
// and such a send settles by silence.
//
// # Failures
//
// New pings the daemon and inspects the image or container, so a daemon
// that is down, an image that is not there (nothing is pulled) or a
// container that is not running fails the load (ErrUnreachable,
// ErrNoImage, ErrNoContainer). A container that dies under a session (a
// kill, the memory limit) ends its exec's stream: the session exits, with
// SIGKILL as the signal when the kernel's OOM killer took it.
package terminaldocker
