// Package bashtool is the plugin "tool-bash-persistent": the model-facing
// tool `bash(command)`, one persistent shell per owner on a `terminals`
// backend (type "shell" by default: bash on a PTY, from plugin
// "terminal-bash").
//
// # One call
//
// Calls of one owner run one at a time, strictly in arrival order; owners
// run in parallel. The owner's shell is created lazily in its workspace;
// timeoutMs bounds the command (a call's own timeoutMs may only shorten
// it); starting the shell comes first, under a bound of its own, since a
// machine starting many shells queues them and that wait is not the
// command's. A call with background set runs its command, in braces, as a
// background job of the shell, and answers with the job's number, which
// it takes out of bash's announcement of the job.
//
// The command goes to the backend's Exec (termapi.Executor), which runs it
// as one command line of the shell and learns from the shell itself, out of
// band, how it ended; nothing the command prints is taken for the end. The
// call follows the terminal's output as the backend streams it, without
// polling:
//
//   - the command completed: its output is the result, plus the job
//     notices bash has for it and `[exit code: N]` for a non-zero status;
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
//   - the shell came back to its prompt without completing the command
//     (something interrupted it, or it replaced the shell): the output so
//     far, without an exit code;
//   - silence where the backend proves waits (Capabilities.InputProof):
//     the command is still running; wait again. Where it cannot, silence
//     is all there is to go by: the command is interrupted as for a
//     waiting program, with a notice that says the wait was inferred;
//   - the deadline: the timeout header, the partial output, and what
//     timeoutAction did (a result, not an error): "reset" closes the shell
//     in the background and adds the reset notice; "interrupt" signals the
//     foreground job as for a waiting program and keeps the shell;
//     "background" stops the job (SIGTSTP) and resumes it with bg as a
//     background job of the same shell, falling back to interrupting it
//     when it does not stop. Only a shell that does not come back is reset.
//     Sends run without the deadline, so it is the action that decides the
//     command's fate, not a cancellation's SIGINT;
//   - the caller cancels (or goes away): by cancelAction, the command is
//     interrupted as a timeout's "interrupt" does it (the send's SIGINT,
//     then SIGTERM and SIGKILL while the shell does not come back, and what
//     else the command started is ended where the backend can tell) and
//     the shell kept, or the shell is reset; the call fails with the
//     cancellation, which the client does not read, and the owner's next
//     result starts with one line saying the previous command was
//     cancelled, after how long, what ended it, then the output it printed
//     (clipped like any output). Reports of several cancelled calls wait,
//     in order, for a result to carry them.
//
// A shell that died before it took the command (or was not at its prompt,
// because a program had taken its terminal) is replaced, and the command
// runs once in the new shell, with a notice saying so.
//
// # Output
//
// Output is rendered as a terminal shows it (the backend collapses CR
// progress bars and removes escape sequences). Output longer than
// maxOutputChars characters (code points, never split) keeps its beginning
// and its end, cut at line breaks when one is near, around a notice saying
// how many characters and lines were left out and naming a file holding the
// whole output, in a per-owner directory removed with the owner; the
// result's last line names that file again, since some clients cut the
// middle of a long result. The file is for the model's next command, so it
// must be where the shell reads it: a local shell reads dsh's own copy
// (Capabilities.HostFiles); a shell on another host or in a container gets
// a copy through its backend (Session.WriteFile), in a directory of its
// session's, and the result names that copy. The file holds the output byte for byte: the
// backend hands a line longer than its buffers out in pieces, without
// newlines between them. Nothing is
// lost to a scrollback limit: the call streams every line as it is produced
// (the backend holds the terminal back while the call is behind).
//
// # Text outside the command
//
// Background jobs print between calls, and bash reports on jobs. The tool
// shows what is information:
//
//   - what the terminal showed since the previous call (background jobs'
//     output) comes at the start of the next result, under "[output from
//     background jobs since the previous call]", because the model started
//     those jobs and would otherwise never see it; the backend keeps every
//     byte of it exactly once, up to maxReadBytes, and a long one is cut to
//     its head and tail with the whole of it in a file, like any output;
//   - job notices bash has when a command ends (`[1]+ Done ...`) are
//     appended to that command's result;
//   - there are no prompts to drop: the shell's prompts are empty, a
//     PROMPT_COMMAND the model sets runs quietly, and bash's own `exit` line
//     is dropped when the shell exits.
//
// # Differences from the original tool, on purpose
//
//   - `set -e` applies within the call that sets it, not to later calls:
//     a sticky errexit turns any later failing command into a lost shell.
//   - Output is kept head and tail (the original kept the head only, and
//     lost both ends past its scrollback).
//   - A waiting program is interrupted within milliseconds instead of
//     holding the call until timeoutMs.
//   - The end of a command and its status come from the shell out of band,
//     so no output can fake them, and a model's prompt settings never show.
//   - A shell that died between calls is reported at the start of the next
//     result, and the command runs in a fresh shell.
//   - A timeout answers at timeoutMs (the original waited for the shell's
//     kill), says its real duration ("0.5 seconds", not "0 seconds"), and
//     can keep the shell (timeoutAction); the shell's start does not count
//     against it (the original counted it).
package bashtool
