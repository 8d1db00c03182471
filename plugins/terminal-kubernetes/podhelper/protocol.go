// Package podhelper is the small static program the kubernetes backend
// puts in a session's pod (cmd/dsh-kube-helper), and the protocol the
// backend speaks to it. Inside the pod it sees what the backend cannot: the
// processes of the pod's pid namespace in /proc. It gives back what the
// local backend has from /proc on its own machine:
//
//   - the stdin proof: whether the terminal's foreground job (not the
//     shell at its prompt) is blocked reading the terminal;
//   - SIGTERM, SIGKILL, SIGHUP and SIGCONT for the foreground process
//     group, which a terminal has no character for;
//   - the sweep at close: every process the shell started, setsid, nohup
//     and double forks included, ended and waited for.
//
// # Modes
//
//	dsh-kube-helper install DEST      copy itself to DEST (an init container does this)
//	dsh-kube-helper hold              wait, reaping orphans, until SIGTERM (a container's first process)
//	dsh-kube-helper shell NAME -- CMD run CMD (the shell) as its child on this terminal, serve NAME
//	dsh-kube-helper control NAME      relay stdin and stdout to the shell helper serving NAME
//
// The shell's exec runs `shell`: the helper gives the terminal up, starts
// the shell in a session of its own with the terminal as its controlling
// terminal, and stays as its parent, so that reading the shell's and its
// jobs' /proc files needs no privilege even under Yama. It serves NAME, an
// abstract unix socket (the pod's network namespace, no file), and exits
// with the shell's status once it has swept what the shell left.
//
// A second exec, without a terminal, runs `control`, which connects to NAME
// and relays: the backend's requests go down its stdin, the answers come
// up its stdout. One request per line, one answer per line:
//
//	probe            ok 1 | ok 0      the foreground job waits reading the terminal
//	learn            ok               note the read the shell blocks in at its prompt
//	signal SIGTERM   ok PGID | err nofg … | err shell … | err unsupported …
//	sweep            ok | err …       end every process of the shell, the shell last
//
// When the shell has ended (and its processes are swept), the helper says
// how on every control connection before it exits, unasked:
//
//	end code N | end signal SIGKILL
//
// since an exec reports only an exit code, and 137 may be `exit 137`.
//
// The shell at its prompt blocks in a read on the terminal too; `learn`,
// sent right after the first prompt, records that read so that a probe
// tells it from a read builtin of the shell (read line).
package podhelper

// The requests of the control protocol.
const (
	ReqProbe  = "probe"
	ReqLearn  = "learn"
	ReqSignal = "signal"
	ReqSweep  = "sweep"
)

// The first word of an answer, and the codes of a refusal.
const (
	AnsOK  = "ok"
	AnsErr = "err"
	// AnsEnd starts the line the helper sends unasked when the shell
	// has ended: "end code N" or "end signal NAME".
	AnsEnd = "end"

	ErrCodeNoForeground = "nofg"
	ErrCodeShell        = "shell"
	ErrCodeUnsupported  = "unsupported"
	ErrCodeFailed       = "failed"
)

// SocketName is the abstract unix socket a shell helper serves for name.
func SocketName(name string) string { return "@dsh-kube-helper/" + name }
