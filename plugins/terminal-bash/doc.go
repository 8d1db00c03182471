// Package terminalbash is the "shell" backend (plugin "terminal-bash"):
// a bash on a PTY per session, driven by a protocol nothing in the shell
// can forge, and closed without leaving a process behind.
//
// Each session also decides when a send is done, from /proc rather than
// from output, and renders what the terminal shows.
//
// # The session
//
// A session is bash started as a session leader on the slave of a fresh
// PTY (rows×cols, TERM=dumb, no echo), with no line editor (--noediting),
// inside its own cgroup v2 leaf where one can be made, with an environment
// scrubbed of anything that looks like a credential (a name containing
// KEY, PASSWORD, SECRET or TOKEN, or starting with DSH_, in any case) and
// of every descriptor dsh inherited. Its prompts are empty, so the
// terminal shows only what commands print.
//
// Three goroutines serve a session. The reaper waits for bash to exit. The
// read loop waits for output and is the session's clock: the master's
// read deadline is always set to the next moment a check is due, so a
// quiet terminal wakes the loop exactly then, with no polling and no timer
// goroutines. The control reader reads what the shell's plumbing reports.
// Every read of the master happens under the session lock together with
// rendering it (screen.Filter for UTF-8 and escape sequences, screen.Lines
// for carriage returns and erases), so whoever holds the lock can drain the
// terminal and output is never rendered out of order. Committed lines go
// to the scrollback and to the live send or, between sends, to a bounded
// buffer the next send starts with, so output between sends is never lost.
// The session keeps the slave open itself, so the master never reports the
// terminal gone while the session lives.
//
// # The shell protocol
//
// Exec (termapi.Executor) runs one command. Each session has a private
// directory (0700, on tmpfs where there is one) with two FIFOs and the
// plumbing script (protocol.go), which bash sources at its first prompt
// from PROMPT_COMMAND. For a command, dsh
//
//  1. types one printable line, `\builtin eval -- 'COMMAND';{ \__dsh_e
//     NONCE;} 2>/dev/null >>"$__dsh_O"`, which the terminal's line
//     discipline hands to bash whole (no line editor runs, so its length
//     costs next to nothing). It evals the command in the shell's own
//     context (cd, export, functions and exit work as the model expects;
//     heredocs and syntax errors are eval's business, never a shell waiting
//     for more lines), and reports the end. The command rides on the line,
//     single-quoted, when it is short printable ASCII; any other command is
//     written into the "in" FIFO first, and the line starts with
//     `\__dsh_b LEN;`, which reads exactly LEN bytes of it, and evals
//     "$__dsh_c";
//  2. waits for the end record the plumbing writes into the "out" FIFO:
//     the status, the shell's flags and the job notices (`jobs -n`, without
//     the announcements of jobs the command started). Once it arrives, and
//     the terminal has been drained of what was written before it, the
//     command is complete.
//
// The NONCE is 64 random bits typed on that line and nowhere else: no
// variable, function or file holds it, so only the line can report its
// end. Printed output can never end, hide or forge a command, and neither
// can a program that writes into the FIFO. Whatever else the plumbing
// reports (its prompt hook at a prompt reached without that end, or "ready"
// once installed) is a claim: it counts only when /proc proves bash itself
// at its prompt, blocked in the very read(2) it makes for its next command
// line (same buffer, same count, learnt when the plumbing reports ready; a
// `read` builtin reads elsewhere), with the shell's group in the
// foreground and nothing typed left unread. The plumbing keeps itself
// working whatever a command does to the shell; protocol.go lists how.
//
// Nothing typed can reach anything but bash: a line is typed only when the
// previous command has ended (by its record or the proof) and bash's own
// group owns the terminal, and its terminal settings let no printable
// byte edit the line (lineMode). A shell that replaced itself (`exec bash`) installs the plumbing
// again; if it has a line editor, one more line turns it off.
//
// # A command's own terminal
//
// With commandTerminals (the default) each command of a captured Exec
// (ExecRequest.Captured: the bash tool's; the terminal tools' programs draw
// on the session's terminal) writes, stdout and stderr, to a terminal of
// its own (cmdterm.go): the typed line redirects
// the eval to it, as `>/dev/pts/N 2>&1`; stdin, the controlling terminal
// and job control stay the session's. A job prints on the terminal of the
// command that started it: the command's output while the command runs,
// background output afterwards (the next Exec's ExecResult.Background, or
// the running command's, on each of its results), so a chatty job never
// passes for a later command's output. At a command's end this side lets
// go of its terminal; one nothing else holds (the master then reports a
// hang-up) is kept for the next command, one a job holds is read until
// the job lets go, then closed. The terminal is made where the shell finds
// it: in its own devpts instance, through its root, when sandboxed. The
// stdin proof counts a read of the command's terminal (a program may open
// it anew by name; stdout and stderr are open for writing only). A command with the word exec where a command can be
// writes to the session's terminal: a shell that replaces the shell takes
// its stderr for its terminal, and would go without job control. Past 64
// terminals held by jobs, commands share the session's terminal again.
//
// # Readiness
//
// A send (Exec, or StartSend typing text) settles on the first of these,
// checked as events arrive:
//
//  0. The command's end record (stdin_read, Prompt, Exec completed). For a
//     quick command this is the only check: no /proc read, no timer.
//  1. The prompt proof (stdin_read, Prompt): a prompt or ready claim, or
//     the probe below, proves bash at its prompt. During an Exec that means
//     the command line was abandoned (an interrupt ended it); for a line
//     typed by hand it needs the hook's claim, since the same read waits for
//     a continuation line.
//  2. The stdin proof (stdin_read): a few milliseconds after the write or
//     the last output, and then at doubling intervals up to stdinProbeMaxMs
//     while the terminal stays quiet, the foreground group is proven, from
//     /proc, to be blocked reading this terminal (proc.WaitingOnTerminal),
//     and nothing typed is left unread (TIOCINQ on the slave, after making
//     the kernel deliver what was written). That is cat, an interpreter, a
//     pager, a password prompt, or bash itself in `read`. A program that
//     took the terminal and fakes a prompt is such a reader too, never the
//     end of a command. The same probe finds a stopped shell and continues
//     it (SIGCONT), and reports that on the command's result.
//  3. Silence (inferred_idle): idleSilenceMs without output and without
//     proof, for what cannot be proven, such as a program busy without
//     output.
//  4. The deadline (timeout): the send's Timeout, or timeoutMs.
//
// And at any time: bash exits (session_exit), once the output written
// before the exit has been read; or the session is closed (session_exit).
// The Exec result says whether the command had been taken at all (a shell
// that died before reading it never ran it).
//
// Evidence is reset at every boundary, so nothing seen before a write or a
// signal can settle a send after it: the write, Signal, and the interrupt
// of Cancel. An empty send writes nothing and so keeps what was learnt: a
// command that has ended, or a shell at its prompt, answers at once. While
// a send's write or interrupt is still going on, the proofs are not taken.
//
// After a signal, a caller should wait with an empty send before typing:
// the signal's effect (a job dying, bash reaching its prompt) takes a
// moment, and text typed meanwhile reaches whoever still reads the
// terminal.
//
// # Writing and interrupting
//
// Text is written at once when the terminal takes it, which it almost
// always does; otherwise the rest is written by a goroutine while the send
// runs, and the send keeps the session's only slot until that write is
// over. A command longer than the FIFO holds (a page) is written the same
// way while bash reads it. Cancel does what ^C does without relying on the
// terminal's ISIG: it abandons a write still in progress, discards typed
// input nobody has read (TCIFLUSH), and sends a real SIGINT to the
// foreground group. When that group is bash itself and bash is busy, the
// signal first waits (at most about a tenth of a second) for bash to block
// or hand the terminal to the job it is starting, so the interrupt reaches
// the command. Cancel does not settle the send: the shell's report does.
//
// SIGTSTP to the job of a running captured command ends the command line at the job
// (stopJob): bash moves only the job it runs, and told of the stop it
// breaks a loop around the job and runs the rest of the list at once. So
// the shell is held (SIGSTOP) while the job stops, then sent SIGINT and
// continued: it takes the interrupt, lowest signal first, before it learns
// of the stop, and abandons the line. The job stays, stopped, for bg.
//
// # Output
//
// What a send returns is rendered like a terminal shows it: "10%\r20%\r30%\n"
// is the line "30%", CRLF is one newline even when split across reads,
// colours and titles are gone, invalid UTF-8 is U+FFFD. Send.Output returns
// complete lines; the line still being written is in the settled viewport,
// which holds the lines not pulled yet plus that line, cut to the newest
// maxReadBytes. A command's output ends with the command: an escape
// sequence it left open is closed and its last line is broken off, so the
// next command's output starts clean. What the terminal showed between an
// Exec and the send before it (background jobs) comes with the Exec's
// result, not in its output. A caller that does not stream gets the newest
// maxReadBytes and Truncated; a streaming caller (Stream) gets every line
// exactly once, because the read loop stops reading the master while the
// caller is more than maxReadBytes behind, and bash's output waits in the
// kernel.
//
// # Cleanup
//
// Close hangs the terminal up (closing the master sends SIGHUP to bash,
// which passes it on to its jobs) and then runs proc.Terminate: SIGTERM to
// every tracked process with a grace period, a rescan, SIGKILL to what is
// left, the shell (SIGHUP, SIGTERM, then SIGKILL), the tracked processes
// again, and finally cgroup.kill. Each mechanism catches what the previous
// ones miss:
//
//   - the hangup ends ordinary jobs at once;
//   - the process tracker (refreshed on the probe path, at most every
//     250 ms, and once more right before the hangup) knows every descendant
//     and every member of bash's session it ever saw, including nohup'd,
//     disowned and double-forked processes that were reparented away, and
//     signals them by identity (pid and start time), so a recycled pid is
//     never hit;
//   - the cgroup holds bash from its first instruction (clone3 into the
//     cgroup) and everything it ever starts, so even a process that called
//     setsid and left the tree before any refresh saw it is killed.
//
// Close returns only when all of them are gone (or reports the survivors),
// bash is reaped, the control directory is removed and the session's
// goroutines have ended. Concurrent calls share one close; a failed close
// can be retried. Backend.KillAll is the synchronous SIGKILL of everything,
// without waiting, for a host that is dying; the plugin's unload falls back to it when closing its
// sessions fails. Where cgroup v2 cannot be used (not writable, not root,
// an old kernel), the tracker works alone and a process that leaves bash's
// session before a refresh sees it escapes.
//
// # Sandbox
//
// With the sandbox config (or a spawn's SpawnSpec.Sandbox) the shell starts
// confined by the kernel: internal/sandbox re-executes this binary as a
// helper that confines its own thread and executes bash, in a user
// namespace of its own in which it keeps no capability and, with network
// false, a network namespace with only loopback and a seccomp filter that
// refuses new unix sockets. The modes that restrict files add a mount
// namespace (every mount read-only, the writable paths bound back; the git
// hooks and config of a writable repository read-only; dsh's private
// directory empty but for the session's parts; a devpts of its own) and
// Landlock (writes only below the workspace, the session's TMPDIR in the
// control directory, and the configured directories; from ABI 6 no signal
// or abstract socket outside the session). Such a shell's terminal is made
// by the helper in its devpts and handed to the backend over a socket, so
// that ttyname(3) names it inside. bash keeps the pid the backend saw at
// fork, so the proofs, the tracker and the cgroup work as without it. A
// setting the kernel cannot enforce fails the load, or the spawn that asks
// for it.
//
// # Decisions
//
//   - No line editor: the terminal's line discipline hands bash a typed
//     line whole, where readline reads and redisplays it a byte at a time
//     (about 4 µs a character), and dsh owns the terminal's settings
//     (lineMode) instead of a line editor that restores its own copy of
//     them, echo included, after every command.
//   - The command goes through a FIFO and the end through another, not
//     through the terminal: what a command prints is only ever output.
//     The shell opens each FIFO only for the builtin that uses it, so no
//     program it starts inherits either.
//   - The prompt variables are dsh's between commands. A command that sets
//     PS1 or PROMPT_COMMAND keeps its value until it ends; a PROMPT_COMMAND
//     it set runs after every later command, with no input and its output
//     discarded, so activation scripts and directory hooks keep working.
//   - A signal is a boundary like a write, so a prompt the signal causes
//     settles the next wait, never an older state.
//   - Typed input is flushed on Cancel, as ^C does: an interrupted send's
//     text must not run later as a command.
package terminalbash
