package bashtool

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
)

// markers are the private, per-call strings that delimit a command's output
// in the terminal stream. The id is random per call, so a marker of an
// earlier call (or text that merely looks like one) never matches.
type markers struct {
	id string
}

func newMarkers() markers {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return markers{id: hex.EncodeToString(b[:])}
}

// start is printed on a line of its own before the command runs.
func (m markers) start() string { return "__dsh_" + m.id + "_start__" }

// jobs precedes the job notices printed after the command.
func (m markers) jobs() string { return "__dsh_" + m.id + "_jobs__" }

// endPrefix is followed by the decimal exit status and "__".
func (m markers) endPrefix() string { return "__dsh_" + m.id + "_end_" }

// initScript runs once in every new shell, before its first command. It
// turns off echo of typed input and history (the typed lines are plumbing,
// and `!` must never be expanded), and defines the two functions every
// call's line uses.
//
// Everything typed goes through readline, which costs about 4µs a
// character: the per-call line is kept short by moving the fixed parts into
// these functions, defined once. Only the eval must stay on the typed line:
// inside a function, `declare` and `local` would apply to the function.
//
//   - __dsh_b ID reconnects stdout and stderr to the terminal if an earlier
//     command redirected them (`exec >/dev/null` silences the rest of its
//     own call, not the next ones), and prints the start marker, with xtrace
//     off meanwhile (it cannot run in a silenced group like __dsh_e: the
//     group would undo its exec redirections).
//   - __dsh_e, called inside a group whose stderr is /dev/null (so that
//     xtrace, if the model turned it on, prints none of this plumbing),
//     saves the status and the shell options and switches errexit and
//     xtrace off; prints a jobs marker and `jobs -n` (bash would otherwise
//     print "[1]+ Done ..." just before its next prompt, outside the
//     markers; this prints those notices inside them and marks them
//     reported); prints the end marker with the status; and switches xtrace
//     back on if it was. errexit stays off: it applies inside the call that
//     set it (a failing command then ends the shell, and the tool says so),
//     but a stray `set -e` does not kill the shell on some later failure.
//
// Markers go to /dev/tty, which stays the terminal whatever the command did
// to stdout. They are printed with printf formats, so no typed text (echoed
// after the model runs `stty echo`) ever contains a whole marker.
const initScript = `stty -echo; set +o history +H; ` +
	`__dsh_b(){ { local o=$-; set +x; } 2>/dev/null; ` +
	`[[ -t 1 ]] || exec >/dev/tty; [[ -t 2 ]] || exec 2>/dev/tty; ` +
	`__dsh_id=$1; printf '__dsh_%s_start__\n' "$1" >/dev/tty; [[ $o != *x* ]] || set -x; }; ` +
	`__dsh_e(){ local s=$? o=$-; set +ex; ` +
	`printf '__dsh_%s_jobs__\n' "$__dsh_id" >/dev/tty; jobs -n >/dev/tty 2>&1; ` +
	`printf '__dsh_%s_end_%s__\n' "$__dsh_id" "$s" >/dev/tty; [[ $o != *x* ]] || set -x; }`

// endCall ends every typed line; see initScript.
const endCall = ";{ __dsh_e;} 2>/dev/null"

// typedLimit is the longest line typed for a command; a longer one is read from
// a file, because typing it costs about 4µs a character.
const typedLimit = 2048

// wrap returns the line typed for a command:
//
//	__dsh_b ID;eval -- $'<command>';{ __dsh_e;} 2>/dev/null
//
// The command is one bash ANSI-C string, so the line is one physical line
// (the shell never shows a continuation prompt; heredocs, multi-line scripts
// and unbalanced quotes are eval's business, and a syntax error is an
// ordinary failed command), and it is printable ASCII only: tabs, control
// bytes, '!' and non-ASCII bytes are written as \xHH escapes. A literal TAB
// would trigger readline completion, a ^C or ^Z byte would signal the
// foreground group, '!' would trigger history expansion, and 8-bit input
// depends on the locale's readline settings. eval runs in the current shell,
// so cd, export, functions, aliases, exit and exec affect the persistent
// shell, as the model expects. ok is false when the line would be longer than
// typedLimit; use wrapFile then.
func (m markers) wrap(command string) (line string, ok bool) {
	var b strings.Builder
	b.Grow(len(command) + 48)
	b.WriteString("__dsh_b ")
	b.WriteString(m.id)
	b.WriteString(";eval -- ")
	writeANSIC(&b, command)
	b.WriteString(endCall)
	return b.String(), b.Len() <= typedLimit
}

// wrapFile returns the line typed for a command stored in the file at path:
// the read builtin loads it without a fork, and eval runs it as wrap does.
func (m markers) wrapFile(path string) string {
	var b strings.Builder
	b.WriteString("__dsh_b ")
	b.WriteString(m.id)
	b.WriteString(";IFS= read -r -d '' __dsh_c <")
	writeANSIC(&b, path)
	b.WriteString(";eval -- \"$__dsh_c\"")
	b.WriteString(endCall)
	return b.String()
}

// writeANSIC writes s as a bash ANSI-C quoted string $'...' made only of
// printable ASCII.
func writeANSIC(b *strings.Builder, s string) {
	const hexDigits = "0123456789abcdef"
	b.WriteString("$'")
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\'':
			b.WriteString(`\'`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '!' || c < 0x20 || c >= 0x7f:
			// \x takes at most two hex digits, so a following literal
			// hex digit is never swallowed.
			b.WriteString(`\x`)
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
}

// parseEnd looks for this call's end marker in text. It returns the index
// where the marker starts, the index just after it, and the exit status.
func (m markers) parseEnd(text string) (at, after, status int, ok bool) {
	prefix := m.endPrefix()
	from := 0
	for {
		i := strings.Index(text[from:], prefix)
		if i < 0 {
			return 0, 0, 0, false
		}
		i += from
		j := i + len(prefix)
		k := j
		for k < len(text) && text[k] >= '0' && text[k] <= '9' {
			k++
		}
		if k > j && strings.HasPrefix(text[k:], "__") {
			n, err := strconv.Atoi(text[j:k])
			if err == nil {
				return i, k + 2, n, true
			}
		}
		from = j
	}
}
