// Package inband drives a bash at the far end of a byte stream (a Link:
// an SSH session's PTY, a container exec's TTY) with a protocol carried in
// the terminal itself. Backends bring the link; this package the rest.
//
// Its Session implements termapi.Session and termapi.Executor, so the
// bash tool runs on it.
//
// Four goroutines serve a session: the read loop (the only reader of the
// terminal, which scans, renders and acts on what it reads under the
// session's lock, in stream order), the exit waiter, the clock (the one
// timer: the live send's deadline, its silence bound and the stdin proof's
// cadence), and the writer (the only writer, so typed text keeps its order
// and a blocked write never holds the lock). There is no polling: the read
// loop blocks on the link, and the clock sleeps until the next bound.
//
// # The shell protocol
//
// The far end offers no /proc, no FIFO and no second channel into the
// shell to rely on, so everything goes through the terminal, in-band, and
// is made unforgeable by what only the typed line knows.
//
// At startup dsh types one line that evals the plumbing (protocol.go): a
// prompt that is a marker, an OSC string that no terminal shows,
// ESC ] 6973 ; P ; TOKEN ; $? BEL, with a random per-session token; the
// begin and end reports; and a prompt hook that keeps them working whatever
// a command does. The session is ready at the first prompt marker.
//
// For a command, dsh types
//
//	\__dsh_b NONCE -;\builtin eval -- "$__dsh_x"$'COMMAND';{ \__dsh_e NONCE -;} 2>/dev/null
//
// NONCE is 64 random bits, fresh per command, typed on this line and
// nowhere else: no variable, function or file holds it, and the trailing
// "-" keeps it out of $_. __dsh_b prints the begin marker (B;NONCE): the
// shell has taken the line. eval runs the command in the shell's own
// context, so cd, export, functions and exit work as typed. __dsh_e prints
// the end marker with the status (E;NONCE;STATUS) to /dev/tty, before the
// prompt marker follows. Markers are cut out of the stream before it is
// rendered, so they never reach output, viewport or scrollback. Printed
// output cannot end, hide or forge a command: a marker counts only with
// the current command's nonce, which the command cannot learn (short of
// reading the shell's memory or planting a DEBUG trap that inspects
// BASH_COMMAND, which no program does by accident).
//
// The command travels as an ANSI-C quoted word ($'...'): printable ASCII
// as is, every other byte (controls, DEL, UTF-8, the quote, backslash and
// '!') as \xHH, and split into physical lines of at most 2 KiB joined by
// backslash-newline continuations. So the line discipline never sees a
// control character (^C, ^D, ^U, ^Z ... would act), a line never exceeds
// what canonical mode holds (4095 bytes), bash decodes the exact bytes
// itself without a program (base64 would need one, and a fork, per
// command), and the whole word is parsed before anything runs: any number
// of lines, here-documents, and syntax errors are eval's, never a shell
// waiting for more input.
//
// # Readiness
//
// A send settles on the first of these, as events arrive:
//
//  0. The command's end marker, then the prompt marker (stdin_read,
//     Prompt, Exec completed with the status). What the shell prints
//     between the two (job notices) is the result's Notices.
//  1. The prompt marker alone (stdin_read, Prompt): the shell is back at
//     its prompt. During an Exec, after the begin marker, the line was
//     abandoned (an interrupt ended it), with the prompt's $?. A prompt
//     before the begin marker is the one the shell showed before it read
//     the line, and does not count, unless an interrupt discarded the line.
//  2. Silence (inferred_idle): idleSilenceMs without output.
//  3. The deadline (timeout): the send's Timeout, or timeoutMs.
//
// And at any time: the session ends (session_exit) once everything written
// before it has been read, whether the shell exited (its status or signal,
// from the server) or the connection was lost (code -1).
//
// Compared with the local shell backend: tiers 0, 2, 3 and the exit are the
// same. Tier 1 is weaker: locally the prompt hook's report is only a claim
// until /proc shows bash blocked in its own prompt read; here the prompt
// marker is taken as the proof, because nothing else can be seen. Its
// token keeps stray output from faking it, but a program that reads PS1 and
// prints it deliberately can make a send settle early (an Exec then reports
// abandoned, never completed or a status). Continued is never set (a
// stopped shell cannot be seen).
//
// The stdin proof (a program blocked reading the terminal: cat, read, a
// REPL, a pager, a password prompt) comes from the far end's processes.
// A link that sees them from here says so with Options.WaitingForInput (a
// container on this machine, through its host pid). Otherwise a backend
// that can run a second program beside the shell (another session of the
// same SSH connection, another exec in the container) gives
// Options.StartProof: the plumbing reports the shell's pid ($$) with a
// marker of the session's token before the first prompt, and the backend
// starts probe.sh there (RemoteProof), which answers each question from
// the far /proc with bash builtins only: a job's thread blocked in read or
// readv on the terminal, or, where the syscall files are closed to it
// (Yama's ptrace_scope 1), sleeping where the kernel's terminal read sleeps
// with nothing else open that could put it there; the shell's own read
// builtin, told from the read at its prompt, which the probe learns at the
// start, or, where the syscall files are closed, by the same sleep in the
// same read (its count of characters read unchanged) at two questions in
// a row: the prompt's marker, printed before the prompt's read, has then
// reached the session before the second answer. Relays that poll the terminal and a socket never count. A far end
// without Linux's /proc or bash refuses the probe, and the session has no
// proof (Capabilities.InputProof false). A probe lost later (its channel
// closed, an answer too late) is started again, knowing the prompt's read
// from the old one, up to three times; then the session has no proof and
// says so. The session asks the proof 20 ms
// after the last output, then at doubling intervals up to
// Options.ProbeMax, and settles the send as stdin_read (without Prompt)
// when it proves a wait and nothing was printed meanwhile. Without a
// proof, such a send settles as inferred_idle after the silence bound.
//
// # Output
//
// What the terminal prints is rendered by the shared screen package
// (Filter, Lines, Scrollback), as locally: "\r" overwrites, escape
// sequences are dropped, invalid UTF-8 is U+FFFD. Output returns complete
// lines; the line still being written is in the settled viewport. A
// command's output ends at its end marker (an unfinished escape sequence is
// closed, its last line broken off). Output between sends goes to the next
// Exec's Background. A streaming send gets every byte: while its caller is
// more than 256 KiB behind, the read loop stops reading, the link's
// buffers fill, and the far program blocks. A send that does not stream keeps
// the newest 256 KiB and reports Truncated.
//
// If a command turns the terminal's echo on (stty sane), the echo of the
// next typed line is removed from the output (the nonce makes it
// unmistakable), and that line turns echo off again.
//
// # Interrupts and signals
//
// There is no process group to signal from here. SIGINT is the ^C byte,
// SIGTSTP the ^Z byte and SIGQUIT the ^\ byte, typed into the PTY: the far line discipline
// signals the foreground process group and discards unread input, as a
// keyboard would. Text of the send not written yet is abandoned first. An
// interrupt for a command whose line is typed but not yet taken waits for
// its begin marker, so it reaches the command and not the shell about to
// read it. A job that is starting (forked, not yet given the terminal)
// when ^C arrives misses it: the shell takes it, prints a newline and goes
// on waiting for the job. So a character typed for a command that began
// less than a second ago and has printed nothing is typed again, from
// 250 ms on at doubling intervals for two seconds, until the command is
// over or prints something. SIGTERM, SIGHUP and SIGCONT have
// no terminal character and fail with ErrUnsupportedSignal; SIGKILL always
// fails with ErrRefuseKillShell, since whether the shell itself is in the
// foreground cannot be told. While the shell is idle at its prompt a
// signal does nothing.
package inband
