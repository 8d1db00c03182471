package inband

import (
	"bytes"
	"strconv"
	"strings"
)

// The shell protocol: the texts typed into the remote bash (its plumbing,
// once, and one line per command) and the markers it prints back. See the
// package documentation for the model.
//
// Everything travels through the terminal, so every text typed is
// printable ASCII in physical lines of at most maxTypedLine bytes: the
// line discipline hands bash each line whole (a canonical-mode line holds
// at most 4095 bytes), and no byte of it is a terminal control character
// (^C, ^D, ^U, ^V, ^W, ^Z, DEL, ...). Command text is carried as bash
// ANSI-C quoted words ($'...'), split across physical lines by
// backslash-newline continuations, which bash joins into one word before it
// runs anything.

// markerPrefix starts every marker: an OSC string (ESC ] 6973 ;), which a
// terminal and the screen renderer drop, ended by BEL.
const markerPrefix = "\x1b]6973;"

// maxMarker bounds a marker's payload; longer strings are not markers.
const maxMarker = 128

// maxTypedLine bounds a physical line typed into the terminal, well below
// the 4095 bytes a canonical-mode line can hold.
const maxTypedLine = 2048

// Marker kinds.
const (
	// markBegin: B;<nonce>. The shell read the command's line and is about
	// to run it.
	markBegin = 'B'
	// markEnd: E;<nonce>;<status>. The command ran to its end with status.
	markEnd = 'E'
	// markPrompt: P;<token>;<status>. The shell is at its prompt; status is
	// $? (an abandoned line's, after an interrupt).
	markPrompt = 'P'
	// markShell: I;<token>;<pid>. The shell's process id, as the far end
	// numbers it ($$), once, before its first prompt.
	markShell = 'I'
)

// marker is one parsed marker.
type marker struct {
	kind   byte
	id     string // the nonce (begin, end) or the session's token (prompt, shell)
	status int    // -1 when the shell did not say; the pid for markShell
}

// parseMarker parses a marker's payload (between the prefix and BEL).
func parseMarker(p []byte) (marker, bool) {
	f := strings.Split(string(p), ";")
	if len(f[0]) != 1 || len(f) < 2 || len(f) > 3 {
		return marker{}, false
	}
	m := marker{kind: f[0][0], id: f[1], status: -1}
	switch {
	case m.kind == markBegin && len(f) == 2:
	case (m.kind == markEnd || m.kind == markPrompt || m.kind == markShell) && len(f) == 3:
		if n, err := strconv.Atoi(f[2]); err == nil && n >= 0 {
			m.status = n
		} else if m.kind != markPrompt {
			return marker{}, false
		}
	default:
		return marker{}, false
	}
	if m.id == "" {
		return marker{}, false
	}
	return m, true
}

// Typed lines call the plumbing through quoted words (\__dsh_b), so no
// alias applies. The trailing "-" argument keeps the nonce out of $_, which
// bash sets to the last argument of the previous command: otherwise the
// command would find its own nonce there.
const (
	beginCall = `\__dsh_b `
	endCall   = `;{ \__dsh_e `
	callTail  = ` -;} 2>/dev/null` + "\n"
	// echoOff turns the terminal's echo off again after the end report,
	// for a terminal a command left echoing (stty sane).
	echoOff = ` -;\builtin command stty -echo;} 2>/dev/null` + "\n"
)

// appendCommandLines appends the text typed for one command: report the
// begin, eval the command in the shell's own context (so cd, export,
// functions and exit work as typed; here-documents and syntax errors are
// eval's, never a shell waiting for more lines), report the end with its
// status. Errors of the end call itself (xtrace) go nowhere; the markers
// go to /dev/tty. With fixEcho, the terminal's echo is turned off after the
// end report.
func appendCommandLines(dst []byte, command, nonce string, fixEcho bool) []byte {
	dst = append(dst, beginCall...)
	dst = append(dst, nonce...)
	dst = append(dst, ` -;\builtin eval -- "$__dsh_x"`...)
	dst = appendQuoted(dst, command)
	dst = append(dst, endCall...)
	dst = append(dst, nonce...)
	if fixEcho {
		return append(dst, echoOff...)
	}
	return append(dst, callTail...)
}

// stripEcho removes the terminal's echo of typed (its line ends as the
// terminal echoes them, or as typed) from raw, and reports whether it was
// there. Only a terminal a command left echoing echoes; the nonce on the
// typed lines makes the echo unmistakable.
func stripEcho(raw, typed []byte) ([]byte, bool) {
	for _, echo := range [][]byte{bytes.ReplaceAll(typed, []byte("\n"), []byte("\r\n")), typed} {
		if i := bytes.Index(raw, echo); i >= 0 {
			return append(raw[:i:i], raw[i+len(echo):]...), true
		}
	}
	return raw, false
}

// appendStartup appends the line that installs the plumbing. It runs
// before any command, so its functions are parsed without aliases.
func appendStartup(dst []byte, token, dir string, echoOff bool) []byte {
	dst = append(dst, `\builtin eval -- `...)
	dst = appendQuoted(dst, plumbing(token, dir, echoOff))
	return append(dst, '\n')
}

// appendQuoted appends s as one bash word made of ANSI-C quoted parts,
// continued on a new physical line (backslash-newline) whenever the current
// one reaches maxTypedLine. Printable ASCII goes as is, except the quote,
// the backslash and '!' (history expansion); every other byte is \xHH.
func appendQuoted(dst []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	lineStart := bytes.LastIndexByte(dst, '\n') + 1
	dst = append(dst, "$'"...)
	for i := 0; i < len(s); i++ {
		if len(dst)-lineStart >= maxTypedLine {
			dst = append(dst, "'\\\n$'"...)
			lineStart = len(dst) - 2
		}
		switch c := s[i]; {
		case c == '\'' || c == '\\' || c == '!' || c < 0x20 || c >= 0x7f:
			dst = append(dst, '\\', 'x', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '\'')
}

// Quote quotes s as one single-quoted bash word.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// exitBadWorkdir is the status the shell exits with when it cannot enter
// its working directory at startup.
const exitBadWorkdir = 97

// plumbing is the script the startup line evals: the prompt, the begin and
// end reports, and the hook that keeps them working whatever a command
// does. It reports the shell's pid, for a stdin proof beside it
// (Options.StartProof). Its last act is the first prompt, whose marker
// says the session is ready.
func plumbing(token, dir string, echoOff bool) string {
	cd := ""
	if dir != "" {
		cd = "builtin cd -- " + Quote(dir) + " || builtin exit " + strconv.Itoa(exitBadWorkdir) + "\n"
	}
	if echoOff {
		cd += "builtin command stty -echo 2>/dev/null\n"
	}
	return strings.NewReplacer("@TOKEN@", token, "@CD@", cd).Replace(plumbingTemplate)
}

// The template. __dsh_ps is the prompt (a marker with the session's token
// and $?), __dsh_s the status of the last command line (restored as $? for
// the next), __dsh_o its $-, __dsh_x the xtrace prefix of the next eval,
// __dsh_z marks a prompt reached through the end report, __dsh_h holds a
// PROMPT_COMMAND the model set, which runs quietly after every command, and
// __dsh_k is set while it runs, so that a hook calling ours does not loop.
//
//   - The functions and the prompt are read-only, and every builtin is
//     called through `builtin`, so a command cannot redefine them or shadow
//     them with a function of the same name (except `builtin` itself).
//   - Stdin, stdout and stderr are connected to the terminal again at every
//     prompt if a command redirected them for good (exec >file): bash reads
//     its next line from stdin, and the markers go to /dev/tty.
//   - History, history expansion and line editing stay off: a typed line is
//     read whole by the line discipline, and no history holds it.
//   - The prompt variables are assigned only when a command changed them:
//     after a syntax error in eval, bash still points at PS2's old value,
//     and freeing it makes bash print garbage before the next line.
//   - The line editor is switched off only when it is on: switching it,
//     even off, resets bash's input and discards the rest of the line it
//     runs in (which is also why a command that switches it on breaks the
//     session).
//   - errexit, nounset, xtrace and verbose are off for the plumbing; the
//     last three come back for the next command, errexit lasts for its own
//     command only (an interactive shell exits on it otherwise).
const plumbingTemplate = `builtin set +o history +H +euvx
builtin unset HISTFILE
builtin export -n PS0 PS1 PS2 PROMPT_COMMAND
builtin readonly __dsh_ps=$'\e]6973;P;@TOKEN@;$?\a'
PS0= PS1=$__dsh_ps PS2=
__dsh_s=0 __dsh_o=$- __dsh_x= __dsh_z= __dsh_k= __dsh_h=()
__dsh_b() {
	builtin printf '\e]6973;B;%s\a' "$1" >/dev/tty
	__dsh_x= __dsh_z=
	[[ $__dsh_o != *x* ]] || __dsh_x='builtin set -x;'
	[[ $__dsh_o != *v* ]] || builtin set -v
	[[ $__dsh_o != *u* ]] || builtin set -u
	builtin return "$__dsh_s"
}
__dsh_e() {
	__dsh_s=$? __dsh_o=$-
	builtin set +euvx
	__dsh_z=1
	builtin printf '\e]6973;E;%s;%s\a' "$1" "$__dsh_s" >/dev/tty
	__dsh_f
}
__dsh_f() {
	[[ -z ${PS0-} && -z ${PS2-} ]] || PS0= PS2=
	[[ $PS1 == "$__dsh_ps" ]] || PS1=$__dsh_ps
	if [[ ${#PROMPT_COMMAND[@]} != 1 || $PROMPT_COMMAND != '\__dsh_p' ]]; then
		__dsh_h=("${PROMPT_COMMAND[@]}")
		builtin unset PROMPT_COMMAND
		PROMPT_COMMAND='\__dsh_p'
	fi
	[[ ! -o history ]] || builtin set +o history
	[[ ! -o emacs && ! -o vi ]] || builtin set +o emacs +o vi
	[[ -o monitor ]] || builtin set -m
	builtin shopt -q promptvars || builtin shopt -s promptvars
}
__dsh_p() {
	builtin local t=$?
	[[ -z ${__dsh_k-} ]] || builtin return 0
	if [[ -z ${__dsh_z-} ]]; then
		__dsh_s=$t __dsh_o=$-
		builtin set +euvx
	fi
	__dsh_z=
	[[ -t 0 ]] || builtin exec </dev/tty
	[[ -t 1 ]] || builtin exec >/dev/tty
	[[ -t 2 ]] || builtin exec 2>/dev/tty
	__dsh_f
	if [[ ${__dsh_h[*]-} ]]; then
		__dsh_k=1
		for __dsh_c in "${__dsh_h[@]}"; do \__dsh_q; builtin eval -- "$__dsh_c"; done </dev/null >/dev/null 2>&1
		__dsh_k=
	fi
}
__dsh_q() { builtin return "$__dsh_s"; }
builtin readonly -f __dsh_b __dsh_e __dsh_f __dsh_p __dsh_q
PROMPT_COMMAND='\__dsh_p'
builtin printf '\e]6973;I;@TOKEN@;%s\a' "$$" >/dev/tty
@CD@`
