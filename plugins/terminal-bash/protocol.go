//go:build linux

package terminalbash

import (
	"bytes"
	"strconv"
	"strings"
)

// The shell protocol: how a command gets into bash and how dsh learns, from
// bash itself, that it has ended and with which status. See the package
// documentation for the model; this file holds its two texts (the plumbing
// bash sources once, and the line typed for each command) and the parser of
// what the plumbing reports.
//
// Everything the plumbing runs is immune to what commands do to the shell:
//
//   - its functions are defined before any command runs, so their bodies
//     were parsed without the model's aliases, and they are read-only, so a
//     command cannot redefine or unset them;
//   - every builtin is called through `builtin`, so a function named like
//     it does not shadow it, and the typed line quotes its command words
//     (`\__dsh_b`), so an alias does not apply;
//   - a builtin a command disabled (`enable -n printf`) is enabled again
//     before the plumbing uses it, and a function named `builtin`, `enable`
//     or `unset` is removed (in POSIX mode, where `unset` is found before
//     any function) the next time the shell comes back to its prompt
//     without finishing a line;
//   - stdout and stderr are connected to the terminal again at the prompt
//     after a command that redirected them for good (`exec >file`): that
//     lasts for its own call. Only `exec` itself makes a redirection
//     stick, so a function named exec is removed first;
//   - the shell options the plumbing depends on are set again after every
//     command: job control on, history and line editing off (the shell
//     reads whole lines from the terminal, and /proc tells its prompt read
//     from every other read by its buffer); errexit, nounset, xtrace and
//     verbose are off for the plumbing and back on (except errexit, which
//     lasts for its own call only) for the next command, by its typed
//     line;
//   - the prompt variables are dsh's: PS0, PS1 and PS2 are empty, so the
//     shell prints nothing between commands, and PROMPT_COMMAND is the
//     hook below. A command may set them; its values last until the
//     command's end, when a PROMPT_COMMAND it set is kept and run after
//     every later command (with no input and its output discarded).

// The typed lines and the records use these names of the plumbing.
const (
	fnBegin = "__dsh_b" // reads the command from the input channel
	fnEnd   = "__dsh_e" // reports the end of the command line
	// lineModeLine turns the line editor off, for a bash that replaced the
	// shell without --noediting. Only a command line can: a change made in
	// PROMPT_COMMAND is undone when it returns. It reports ready again.
	lineModeLine = "\\__dsh_l\n"
)

// A record is one report of the plumbing on the status channel: a NUL,
// the kind, five fields separated by spaces, a newline. Text before the
// NUL (the output of `jobs -n`, which never contains a NUL) is the job
// notices that go with the record.
//
//	\0E <nonce> <status> <read> <pid> <flags>\n   the command line ended
//	\0A - <status> <read> <pid> <flags>\n         a prompt without that end
//	\0R - 0 0 <pid> <flags>\n                     the plumbing was installed
//
// <read> is 1 when the command line read its command from the input
// channel, <flags> is $- as the command left it.
type record struct {
	kind    byte
	nonce   string
	status  int
	read    bool
	pid     int
	flags   string
	notices string
	// editorOff: dsh typed lineModeLine in answer to this ready record.
	editorOff bool
}

const (
	recordEnd    = 'E'
	recordPrompt = 'A'
	recordReady  = 'R'
)

// recordParser splits the status channel's bytes into records. A record
// torn across reads waits for its newline; what cannot be parsed is
// skipped, because the channel is only a claim: an end record counts only
// with the call's nonce, and the others are checked against /proc.
type recordParser struct {
	buf []byte
}

// maxPendingRecord bounds what the parser holds while it waits for a
// record's end: job notices of thousands of jobs, and some.
const maxPendingRecord = 1 << 20

func (p *recordParser) feed(chunk []byte, out []record) []record {
	p.buf = append(p.buf, chunk...)
	for {
		nul := bytes.IndexByte(p.buf, 0)
		if nul < 0 {
			break
		}
		nl := bytes.IndexByte(p.buf[nul:], '\n')
		if nl < 0 {
			break
		}
		if r, ok := parseRecord(p.buf[nul+1 : nul+nl]); ok {
			r.notices = dropRunning(string(p.buf[:nul]))
			out = append(out, r)
		}
		p.buf = p.buf[nul+nl+1:]
	}
	if len(p.buf) > maxPendingRecord {
		p.buf = p.buf[len(p.buf)-maxPendingRecord:]
	}
	if len(p.buf) == 0 && cap(p.buf) > 64<<10 {
		p.buf = nil
	}
	return out
}

// dropRunning removes the notices of jobs that are running: a job that
// was continued (`bg`, `kill -CONT`) is reported by `jobs -n` once the
// shell learns of it, usually after the command that continued it. Bash
// itself never announces running jobs at its prompt, so neither does dsh.
// A notice's command can span lines; its later lines go with it.
func dropRunning(notices string) string {
	if !strings.Contains(notices, "Running") {
		return notices
	}
	var b strings.Builder
	skipping := false
	for line := range strings.SplitAfterSeq(notices, "\n") {
		if strings.HasPrefix(line, "[") {
			_, rest, _ := strings.Cut(line, "]")
			skipping = strings.HasPrefix(strings.TrimLeft(rest, "+- "), "Running ")
		}
		if !skipping {
			b.WriteString(line)
		}
	}
	return b.String()
}

func parseRecord(b []byte) (record, bool) {
	var f [6][]byte
	n := 0
	for field := range bytes.FieldsSeq(b) {
		if n == len(f) {
			return record{}, false
		}
		f[n] = field
		n++
	}
	if n < 5 || len(f[0]) != 1 {
		return record{}, false
	}
	r := record{kind: f[0][0], read: string(f[3]) == "1", flags: string(f[5])}
	switch r.kind {
	case recordEnd, recordPrompt, recordReady:
	default:
		return record{}, false
	}
	var err1, err2 error
	r.nonce = string(f[1])
	r.status, err1 = strconv.Atoi(string(f[2]))
	r.pid, err2 = strconv.Atoi(string(f[4]))
	if err1 != nil || err2 != nil {
		return record{}, false
	}
	return r, true
}

// maxInlineCommand bounds a command typed on its line: the terminal's
// line discipline holds 4,095 bytes of a line, and a long command is as
// cheap to read from the input channel.
const maxInlineCommand = 2048

// appendCommandLine appends the line typed for a command: get the command,
// eval it in the shell's own context, report the end. The line is
// printable ASCII and the shell reads it whole from the terminal's line
// discipline (no line editor runs), so its length costs next to nothing.
//
// A short command of printable ASCII is typed on the line itself, single
// quoted, which spares bash a function call and a read from the input
// channel; inline reports it. Any other command waits in the input
// channel, and the line reads it first: exactly its byte count, which
// `read -N` counts in characters of the shell's locale. That is the same
// number for ASCII text in every locale bash supports; other text is read
// in the C locale, where a character is a byte (by __dsh_bc). Switching
// the locale twice costs bash more than the whole rest of the plumbing, so
// ASCII commands are spared it.
//
// flags is $- as the shell's last command left it: the plumbing turns
// xtrace, verbose and nounset off for itself, and the line turns them on
// again for this command (xtrace from the command's first word, so the
// trace shows the command and nothing of the line).
//
// redirect, when not empty, names the terminal the command line's stdout
// and stderr go to (a command's own terminal, see cmdTerm).
func appendCommandLine(dst []byte, command, nonce, flags, redirect string) (line []byte, inline bool) {
	return appendLine(dst, command, nonce, flags, redirect, "")
}

// appendLine is appendCommandLine with tail, shell text run after the
// end's report, in the same redirection: a warm shell's hand-over sets
// $_ there (see handOverTail).
func appendLine(dst []byte, command, nonce, flags, redirect, tail string) (line []byte, inline bool) {
	inline = inlineable(command)
	if !inline {
		dst = append(dst, '\\')
		dst = append(dst, fnBegin...)
		if !isASCII(command) {
			dst = append(dst, 'c')
		}
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, int64(len(command)), 10)
		dst = append(dst, ';')
	}
	u, v, x := strings.IndexByte(flags, 'u') >= 0, strings.IndexByte(flags, 'v') >= 0, strings.IndexByte(flags, 'x') >= 0
	if u || v {
		dst = append(dst, `\builtin set -`...)
		if u {
			dst = append(dst, 'u')
		}
		if v {
			dst = append(dst, 'v')
		}
		dst = append(dst, ';')
	}
	dst = append(dst, `\builtin eval -- `...)
	if inline {
		dst = append(dst, '\'')
		if x {
			dst = append(dst, "builtin set -x;"...)
		}
		for i := 0; i < len(command); i++ {
			if command[i] == '\'' {
				dst = append(dst, `'\''`...)
			} else {
				dst = append(dst, command[i])
			}
		}
		dst = append(dst, '\'')
	} else {
		dst = append(dst, '"')
		if x {
			dst = append(dst, "builtin set -x;"...)
		}
		dst = append(dst, `$__dsh_c"`...)
	}
	if redirect != "" {
		dst = append(dst, " >"...)
		dst = append(dst, redirect...)
		dst = append(dst, " 2>&1"...)
	}
	dst = append(dst, `;{ \`+fnEnd+" "...)
	dst = append(dst, nonce...)
	if tail != "" {
		dst = append(dst, ';')
		dst = append(dst, tail...)
	}
	return append(dst, `;} 2>/dev/null >>"$__dsh_O"`+"\n"...), inline
}

// inlineable reports whether command can be typed on its line: short, and
// only printable ASCII, none of which the line discipline acts on (see
// lineMode).
func inlineable(command string) bool {
	if len(command) > maxInlineCommand {
		return false
	}
	for i := 0; i < len(command); i++ {
		if command[i] < 0x20 || command[i] >= 0x7f {
			return false
		}
	}
	return true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// promptHook is PROMPT_COMMAND, exported so that a bash that replaces the
// shell (`exec bash`) installs the plumbing too. Other shells the command
// starts (a nested bash) have another parent and ignore it. It saves $?
// first, for the hook to report. At the prompt after a line that ended
// (the usual case) it only clears the line's end mark, without a function
// call: bash parses this text at every prompt, and runs it.
func promptHook(parentPID int, initPath string) string {
	return "__dsh_t=$?;[[ $PPID == " + strconv.Itoa(parentPID) + " ]]&&{ [[ ${__dsh_z-} && ! ${__dsh_k-} && -t 1 && -t 2 ]]&&__dsh_z=||{ [[ -v __dsh_g ]]||\\builtin . " + shellQuote(initPath) + ";\\__dsh_p;};}"
}

// plumbing is the script every shell sources once, from promptHook at its
// first prompt. It ends by reporting the ready record.
func plumbing(hook, in, out string) string {
	r := strings.NewReplacer("@HOOK@", shellQuote(hook), "@IN@", shellQuote(in), "@OUT@", shellQuote(out))
	return r.Replace(plumbingTemplate)
}

// The template, with @HOOK@, @IN@ and @OUT@ replaced by quoted words.
// __dsh_s is the status of the last command line (the typed line's status,
// so the next line starts with it as $?), __dsh_o its $-, __dsh_z is set
// from a line's end to the next prompt, __dsh_r is set unless the line
// failed to read its command, __dsh_j is $! when the line began, __dsh_h
// holds a PROMPT_COMMAND the model set, and __dsh_k is set while it runs: a
// hook that kept the PROMPT_COMMAND it found ("history -a;
// $PROMPT_COMMAND", as direnv does) calls dsh's own, which must not run it
// again. __dsh_O is the out channel, which the typed line opens for the
// end's report.
//
// Bash copies a function's whole body each time it calls it, so the
// functions every command runs (__dsh_e, __dsh_f) are kept short, and what
// runs only when something is off (a builtin disabled, an option to
// restore, a PROMPT_COMMAND the model set, a redirected stdout, a prompt
// reached without the line's end) is in functions of its own, behind one
// test of everything. __dsh_b reads a command from the input channel;
// __dsh_bc is __dsh_b in the C locale. The first line puts stdout and
// stderr on the session's terminal: a shell that replaced the shell from a
// command (`exec bash`) starts with the command's own (see cmdTerm).
const plumbingTemplate = `[[ -t 1 && -t 2 ]] && builtin exec >/dev/tty 2>&1
builtin export -n PS0 PS1 PS2
PS0= PS1= PS2=
builtin set +o history +H +o emacs +o vi
builtin unset HISTFILE
__dsh_s=0 __dsh_o=$- __dsh_z=1 __dsh_r=1 __dsh_j=${!-} __dsh_c= __dsh_t= __dsh_x= __dsh_k= __dsh_h=()
builtin readonly __dsh_g=@HOOK@ __dsh_O=@OUT@
__dsh_b() {
	__dsh_c= __dsh_r=
	IFS= builtin read -r -N "$1" __dsh_c <@IN@ || __dsh_rr "$1" && __dsh_r=1
	builtin return "$__dsh_s"
}
__dsh_bc() {
	__dsh_c= __dsh_r=
	IFS= LC_ALL=C builtin read -r -N "$1" __dsh_c <@IN@ || { builtin enable read; IFS= LC_ALL=C builtin read -r -N "$1" __dsh_c <@IN@; } && __dsh_r=1
	builtin return "$__dsh_s"
}
__dsh_rr() {
	builtin enable read
	IFS= builtin read -r -N "$1" __dsh_c <@IN@
}
__dsh_y() {
	builtin enable exec
	builtin unset -f exec
	[[ -t 1 ]] || exec >/dev/tty
	[[ -t 2 ]] || exec 2>/dev/tty
}
__dsh_e() {
	__dsh_s=$? __dsh_o=$-
	builtin set +euvx
	__dsh_z=1
	__dsh_f E "$1"
	builtin return "$__dsh_s"
}
__dsh_p() {
	if [[ ${__dsh_k-} ]]; then builtin return
	fi
	[[ -t 1 && -t 2 ]] || __dsh_y
	if [[ ${__dsh_z-} ]]; then __dsh_z=
	else __dsh_a
	fi
}
__dsh_a() {
	__dsh_x=$SHELLOPTS
	POSIXLY_CORRECT=1
	\unset -f builtin enable unset 2>/dev/null
	\unset POSIXLY_CORRECT
	[[ $__dsh_x != *posix* ]] || builtin set -o posix
	__dsh_s=$__dsh_t __dsh_o=$-
	builtin set +euvx
	builtin enable eval read printf jobs set exec return export unset
	__dsh_f A - 2>/dev/null >>@OUT@
}
__dsh_f() {
	builtin enable eval set jobs printf return
	PS0= PS1= PS2=
	[[ ${#PROMPT_COMMAND[@]} == 1 && $PROMPT_COMMAND == "$__dsh_g" && -z ${__dsh_h[*]} && -o monitor && ! -o history && ! -o emacs && ! -o vi && ${!-} == "$__dsh_j" ]] || __dsh_v
	builtin jobs -n
	builtin printf '\0%s %s %s %s %s %s\n' "$1" "$2" "$__dsh_s" "${__dsh_r:-0}" "$$" "$__dsh_o" || __dsh_pf "$@"
	__dsh_r=1 __dsh_j=${!-}
}
__dsh_v() {
	[[ ${#PROMPT_COMMAND[@]} == 1 && $PROMPT_COMMAND == "$__dsh_g" ]] || __dsh_m
	[[ -z ${__dsh_h[*]} ]] || __dsh_n
	[[ ! -o history && ! -o emacs && ! -o vi && -o monitor ]] || builtin set +o history +o emacs +o vi -m
	[[ ${!-} == "$__dsh_j" ]] || builtin jobs -rn >/dev/null
}
__dsh_pf() {
	builtin enable printf
	builtin printf '\0%s %s %s %s %s %s\n' "$1" "$2" "$__dsh_s" "${__dsh_r:-0}" "$$" "$__dsh_o"
}
__dsh_m() {
	__dsh_h=("${PROMPT_COMMAND[@]}")
	builtin unset PROMPT_COMMAND
	PROMPT_COMMAND=$__dsh_g
	builtin export PROMPT_COMMAND
}
__dsh_n() {
	__dsh_k=1
	for __dsh_x in "${__dsh_h[@]}"; do __dsh_q; builtin eval -- "$__dsh_x"; done </dev/null >/dev/null 2>&1
	__dsh_k=
}
__dsh_q() { builtin return "$__dsh_s"; }
__dsh_l() {
	builtin set +o emacs +o vi
	__dsh_z=1
	__dsh_r0
}
__dsh_r0() { builtin printf '\0R - 0 0 %s %s\n' "$$" "$-" >>@OUT@; }
builtin readonly -f __dsh_b __dsh_bc __dsh_rr __dsh_y __dsh_e __dsh_p __dsh_a __dsh_f __dsh_v __dsh_pf __dsh_m __dsh_n __dsh_q __dsh_l __dsh_r0
__dsh_r0
`

// shellQuote quotes s as one bash word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
