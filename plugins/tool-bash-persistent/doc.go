// Package bashtool is the plugin "tool-bash-persistent": the model-facing
// tool `bash(command)`, one persistent shell per owner on a `terminals`
// backend (type "shell" by default: bash on a PTY, from plugin
// "terminal-bash").
//
// # One call
//
// Calls of one owner run one at a time, strictly in arrival order; owners
// run in parallel. The owner's shell is created lazily in its workspace (and
// initialized with `stty -echo; set +o history +H`); timeoutMs bounds the
// whole call, shell creation included.
//
// The command is typed as one physical line that prints a random per-call
// start marker, evals the command in the current shell, and prints an end
// marker with the exit status (see markers.wrap for why each piece is
// there). The call follows the terminal's output as the backend streams it,
// without polling:
//
//   - end marker seen: the output between the markers is the result, plus
//     `[exit code: N]` for a non-zero status;
//   - the shell exited: the output so far, `[shell exited: code N]`,
//     `[shell killed by signal: SIG]` or `[shell exited]`, and the reset
//     notice; the next call starts a fresh shell;
//   - the backend proved the foreground program is waiting for input (read,
//     cat, a REPL, a pager, an editor): the program is interrupted (SIGINT,
//     then SIGTERM, then SIGKILL to the foreground group; never the shell)
//     until the shell is back at its prompt, and the result is the output so
//     far plus one line saying the command waited for interactive input,
//     which this tool does not provide. The next command is never typed into
//     a waiting program; if the shell does not come back it is reset;
//   - silence without proof: the command is still running; wait again;
//   - the deadline: the timeout header, the partial output, and the reset
//     notice (a result, not an error);
//   - the caller cancels: the shell is reset and the call fails with the
//     cancellation.
//
// # Output
//
// Output is rendered as a terminal shows it (the backend collapses CR
// progress bars and removes escape sequences). Output longer than
// maxOutputChars characters (code points, never split) keeps its beginning
// and its end, cut at line breaks when one is near, around a notice saying
// how many characters and lines were left out and naming a file holding the
// whole output, in a per-owner directory removed with the owner. Nothing is
// lost to a scrollback limit: the call streams every line as it is produced
// (the backend holds the terminal back while the call is behind).
//
// # Text outside the markers
//
// Bash and background jobs print things between calls. The tool shows what
// is information and drops what is plumbing:
//
//   - output background jobs wrote while no call was running is shown at
//     the start of the next result, under "[output from background jobs
//     since the previous call]", because the model started those jobs and
//     would otherwise never see it;
//   - job notices bash prints before its next prompt (`[1]+ Done ...`) are
//     appended to the result of the call they follow;
//   - prompts, an echoed wrapper line (after the model ran `stty echo`), and
//     the `exit` bash prints as it exits are dropped.
//
// # Differences from the original tool, on purpose
//
//   - `set -e` applies within the call that sets it, not to later calls:
//     a sticky errexit turns any later failing command into a lost shell.
//   - Output is kept head and tail (the original kept the head only, and
//     lost both ends past its scrollback).
//   - A waiting program is interrupted within about a second instead of
//     holding the call until timeoutMs.
//   - A shell that died between calls is reported at the start of the next
//     result, and the command runs in a fresh shell.
package bashtool
