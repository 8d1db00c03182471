// Package terminaltool is the plugin "tool-terminal": interactive terminals
// for the agent, six tools on the owner-fenced terminals service, for what
// the bash tool refuses: a program that waits for input (a REPL, a
// debugger, ssh, git rebase -i, an editor, a pager, top, an installer's
// questions).
//
//   - terminal_open(command, cwd?, rows?, cols?) runs command in a new
//     terminal and returns its id with a first read;
//   - terminal_send(id, text?, keys?, rows?, cols?) types text, then named
//     keys (Enter, Tab, Escape, Backspace, Up, Down, Left, Right, Home, End,
//     PageUp, PageDown, F1-F12, C-a..C-z), and resizes;
//   - terminal_read(id, waitFor?, timeoutMs?) waits until something worth
//     reading happened and returns it;
//   - terminal_signal(id, signal) sends INT, TERM, KILL, QUIT, TSTP, CONT or
//     HUP to the program's process group;
//   - terminal_close(id) ends the program and the terminal;
//   - terminal_list() lists the agent's terminals: id, state (running,
//     waiting for input, stopped, or how it ended), idle time, command.
//
// # A terminal is a shell running one command
//
// terminal_open spawns a session of the configured backend (a shell) and
// runs the command in it with Exec, in a subshell, after `stty sane` and
// with TERM set for full-screen programs and the shell's own prompts and
// plumbing out of its environment. So a terminal works on every backend
// that runs commands (the local shell, sandboxed or not, SSH, Docker), the
// backend's proof that a program waits for input applies to it as to a bash
// call, and the command's end and exit status come from the shell, out of
// band, as for the bash tool. Typing is a send into the running command. No
// new spawn mode was needed in the terminal contract: a program is a
// command, and the shell around it is what proves its end.
//
// When the command ends the terminal's session is closed, and its last
// screen stays readable until terminal_close (the sixteen newest ended
// terminals of an agent are kept).
//
// # Reading
//
// terminal_read returns when the first of these happens, never after a
// fixed sleep: the program is proven to wait for input (the backend's
// proof: /proc locally, markers and /proc for a local container, silence
// elsewhere, which it says); the output matches waitFor (then a wait for
// input does not end the read, since a program such as top waits for input
// while it redraws); the command ended; the terminal fell silent for the
// backend's silence bound without proof (said so: over SSH that is how a
// remote prompt shows); or timeoutMs passed. Consecutive reads of a program
// that still waits return at once.
//
// What it returns comes from a terminal emulator (package emulator) fed
// with the session's raw output. A program on the alternate screen (vim,
// less, top, htop) is shown as its screen: a header with the size, the
// cursor and the rows that changed since the previous read, then each
// non-blank row with its number. Otherwise the read returns the lines
// written since the previous read, redraws collapsed to their final frame,
// and the line being written (a prompt), at most maxOutputChars, newest
// kept. The header or last line says why the read ended.
//
// # Secrets go around the model
//
// A program proven to wait for a line it does not echo (the terminal's echo
// off while it reads a line: sudo, ssh, read -s, passwd, gpg) asks for a
// secret (terminal.AsksForSecret). When the client declared MCP
// elicitation, the read asks the person at the client with the prompt's
// text, types the answer and a newline into the terminal, and goes on
// waiting; the read says that a secret was given, never what. The answer
// is held by no field, log, metric or file: it goes from the elicitation
// result to the send and nowhere else, and the terminal does not echo it.
// A declined or dismissed request interrupts the program (SIGINT) and says
// so. Without elicitation the read returns at once and says what the person
// can do instead (an ssh agent, a sudo rule, a credential helper). From
// MCP protocol 2026-07-28 a server may not ask during a call: the read
// returns host.InputRequired, the question goes with the call's result,
// the program goes on waiting, and the client's retry of the call (the
// same arguments, with the answer) types the answer and reads on; a
// terminal_open retried so goes on with the terminal it opened.
//
// # Limits and fencing
//
// A terminal is a session of the terminals service, fenced by owner: an
// agent sees, types into and reads only its own; an id of another agent's
// terminal is unknown. maxPerOwner and maxTotal bound the terminals whose
// command runs, per agent and together, with errors that say which bound
// and what to do.
//
// # Handed over by the bash tool
//
// With the bash tool's onInput: handoff, a bash command proven to wait for
// input is not interrupted: the tool hands it to this plugin (Adopt), the
// bash result names the terminal, and the model goes on with terminal_send
// and terminal_read. The session stays the bash tool's shell: when the
// command ends and the shell is back at its prompt, the terminal lets it go
// and the bash tool goes on in the same shell, its state kept;
// terminal_close ends the program (SIGINT, SIGTERM, SIGKILL) rather than
// the shell.
//
// # Decisions
//
//   - terminal_send returns at once: what the keys caused is a
//     terminal_read away, which waits for the right event. A send that is
//     still settling delays the next one, by at most a second.
//   - Reads render only once the screen has every byte the terminal wrote
//     before the event that ends them (SendResult.RawEnd), so a screen is
//     never shown a step behind the proof.
//   - The emulator's answers to a program's queries of its terminal (the
//     cursor position, device attributes) are typed into the terminal when
//     the program is proven, or inferred, to wait: vim asks for the cursor
//     position on its way out and waits a moment for the answer, and an
//     answer typed at any other time would land in whatever reads next.
//   - A read proves a wait again 200 ms after a lone Escape: programs hold
//     the key for their escape timeout before acting on it, and /proc shows
//     them waiting meanwhile.
//   - A program that draws on the main screen by cursor address (top) is
//     shown as a screen until it writes plain lines again.
//   - The tool definitions are short (under 1,500 characters for the six),
//     since every request of the agent carries them.
package terminaltool
