// Package terminalbash is the "shell" terminal backend (plugin
// "terminal-bash"): an interactive bash on a creack/pty PTY per session,
// registered with the terminals service. It decides when a send is done,
// renders what the terminal shows, and makes sure that closing a session
// leaves no process behind.
//
// # The session
//
// A session is bash started as a session leader on the slave of a fresh
// PTY (rows×cols, TERM=dumb), inside its own cgroup v2 leaf where one can be
// made, with an environment scrubbed of anything that looks like a
// credential (a name containing KEY, PASSWORD, SECRET or TOKEN, or starting
// with DSH_, in any case). Bash runs without startup files; its prompt is
// "dsh> ", preceded by a private marker, ESC ] 133;D;<status> BEL, that
// PROMPT_COMMAND prints before every prompt. PROMPT_COMMAND also re-asserts
// PS1, so a command that changes PS1 changes it for zero prompts.
//
// Two goroutines serve a session. The reaper waits for bash to exit. The
// read loop is the only reader of the master: it feeds every chunk through
// screen.Filter (UTF-8, escape sequences, the marker) and screen.Lines
// (carriage returns, erases) and hands the committed lines to the
// scrollback and to the live send, or, between sends, to a bounded buffer
// the next send starts with, so output between sends is never lost. The
// read loop is also the session's only clock: the master's read deadline
// is always set to the next moment a readiness tier is due, so a quiet
// terminal wakes the loop exactly then and output and timers are handled
// in order by one goroutine, with no polling and no timer goroutines. The
// session keeps the slave open itself, so the master never reports the
// terminal gone while the session lives and the loop runs until Close.
//
// # Readiness
//
// A send writes its text (and a carriage return for Enter) and then
// settles on the first of these, checked as events arrive:
//
//  0. The prompt (stdin_read). After a chunk, if a marker arrived since the
//     write and was followed by exactly "dsh> ", and the terminal's
//     foreground group (TIOCGPGRP on the master) is bash's own, bash is back
//     at its prompt. This costs one ioctl, and a send of `true` settles in
//     about as long as bash takes to run it. A nested interactive bash
//     prints the same marker and prompt while it is itself the foreground;
//     tier 1 covers it.
//  1. The stdin proof (stdin_read). A few milliseconds after the write or
//     the last output, and then at doubling intervals up to stdinProbeMaxMs
//     while the terminal stays quiet: the foreground group is proven, from
//     /proc, to be blocked reading this terminal (proc.WaitingOnTerminal),
//     and nothing typed is left unread (TIOCINQ on the slave, after making the
//     kernel deliver what was written, so the wait seen cannot be the one
//     from before the write). That is cat, an interpreter, a pager, a
//     password prompt, or bash itself in `read`, at a continuation prompt,
//     or at a prompt without the marker (PROMPT_COMMAND overridden). The
//     output still buffered in the master is collected before settling.
//  2. Silence (inferred_idle): idleSilenceMs without output and without
//     proof, for what cannot be proven, such as a program busy without
//     output, or one run by another user.
//  3. The deadline (timeout): the send's Timeout, or timeoutMs.
//
// And at any time: bash exits (session_exit), once the output written
// before the exit has been read; or the session is closed (session_exit).
//
// Evidence is reset at every boundary, so nothing seen before a write or a
// signal can settle a send after it: the write (under the session lock, so
// no output is consumed between the reset and the write), Signal, and the
// interrupt of Cancel. An empty send (no text, no Enter) writes nothing and
// so keeps what was seen since the previous send: at an idle prompt it
// settles at once. While a send's write or interrupt is still going on,
// tiers 0 and 1 are not taken (they are looked at again when it ends), so
// a send never settles before its successor could start.
//
// After a signal, a caller should wait with an empty send before typing:
// the signal's effect (a job dying, bash printing a new prompt) takes a
// moment, and text typed meanwhile reaches whoever still reads the
// terminal.
//
// # Writing and interrupting
//
// The text is written at once when the terminal takes it, which it almost
// always does; otherwise the rest is written by a goroutine while the send
// runs, and the send keeps the session's only slot until that write is
// over, so a successor's text is never interleaved with it. Cancel does
// what ^C does without relying on the terminal's ISIG, which raw-mode
// programs turn off: it abandons a write still in progress, discards typed
// input nobody has read (TCIFLUSH), and sends a real SIGINT to the
// foreground group. When that group is bash itself, the signal waits (at
// most about a tenth of a second) until bash blocks, because readline
// handles a SIGINT that arrives while it is busy only at the next
// keystroke, which it swallows. Cancel does not settle the send: the tiers
// do, normally on the prompt that follows.
//
// # Output
//
// What a send returns is rendered like a terminal shows it: "10%\r20%\r30%\n"
// is the line "30%", CRLF is one newline even when split across reads,
// colours and titles are gone, invalid UTF-8 is U+FFFD. Send.Output returns
// complete lines; the line still being written (normally the prompt) is in
// the settled viewport, which holds the lines not pulled yet plus that
// line, cut to the newest maxReadBytes. A caller that does not stream gets
// the newest maxReadBytes and Truncated; a streaming caller (Stream) gets
// every line exactly once, because the read loop stops reading the master
// while the caller is more than maxReadBytes behind, and bash's output
// waits in the kernel.
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
// bash is reaped and the session's goroutines have ended. Concurrent calls
// share one close; a failed close can be retried. Backend.KillAll, and
// KillAll for every backend of the process, is the synchronous SIGKILL of
// everything, without waiting, for a host that is dying; the plugin's
// unload falls back to it when closing its sessions fails. Where cgroup v2 cannot be used (not writable, not root, an old
// kernel), the tracker works alone and a process that leaves bash's
// session before a refresh sees it escapes.
//
// # Decisions
//
//   - The marker comes from PROMPT_COMMAND, not from PS1: invisible
//     characters in PS1 make readline on a dumb terminal in a non-UTF-8
//     locale blank and redraw every prompt, doubling the marker and leaving
//     a line of blanks behind. A PROMPT_COMMAND override costs the marker;
//     the stdin proof then settles at the next prompt within milliseconds.
//   - The marker is recognised only when followed by exactly the prompt
//     text, and the foreground is checked, so output that merely contains
//     a marker (cat of a log, a nested shell) does not count.
//   - A signal is a boundary like a write, so a prompt the signal causes
//     settles the next wait, never an older state.
//   - Typed input is flushed on Cancel, as ^C does: an interrupted send's
//     text must not run later as a command.
package terminalbash
