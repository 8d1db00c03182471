package terminalbash

import (
	"strings"
)

// The controlled prompt and the private marker in front of it.
//
// PROMPT_COMMAND prints the marker, carrying $? (PROMPT_COMMAND runs
// before anything else can change it, and bash restores $? afterwards),
// then re-asserts PS1, so an in-shell `PS1=...` lasts zero prompts. A
// `PROMPT_COMMAND=` override loses the marker; bash at its prompt is then
// still proven idle by the stdin proof (it is the foreground group, blocked
// reading the terminal, with nothing typed left unread) within a few
// milliseconds, so that case never falls back to the silence bound.
//
// The marker is deliberately not part of PS1 (as \[...\]): with any
// invisible characters in the prompt, readline on a dumb terminal in a
// non-UTF-8 locale (LANG unset, as under many service managers) redraws
// every prompt by blanking the line and printing it again, which doubles
// the marker and leaves a line of blanks behind the prompt.
const (
	promptText    = "dsh> "
	promptCommand = `printf '\033]133;D;%s\007' "$?"; PS1='` + promptText + `'`
)

// scrubbed reports whether an inherited variable must not reach the shell:
// a name that looks like a credential, or one of dsh's own.
func scrubbed(name string) bool {
	upper := strings.ToUpper(name)
	if strings.HasPrefix(upper, "DSH_") {
		return true
	}
	for _, word := range [...]string{"KEY", "PASSWORD", "SECRET", "TOKEN"} {
		if strings.Contains(upper, word) {
			return true
		}
	}
	return false
}

// shellEnv builds the shell's environment: parent minus scrubbed names,
// then the overlay (which wins over anything inherited).
func shellEnv(parent []string, ownerID, sessionID string) []string {
	overlay := [...][2]string{
		{"TERM", "dumb"},
		{"PAGER", "cat"},
		{"GIT_PAGER", "cat"},
		{"DSH_SHELL", "1"},
		{"DSH_SESSION_ID", ownerID},
		{"DSH_PTY_SESSION_ID", sessionID},
		{"BASH_SILENCE_DEPRECATION_WARNING", "1"},
		{"PS1", promptText},
		{"PROMPT_COMMAND", promptCommand},
	}
	env := make([]string, 0, len(parent)+len(overlay))
	for _, kv := range parent {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" || scrubbed(name) || overlaid(name, overlay[:]) {
			continue
		}
		env = append(env, kv)
	}
	for _, kv := range overlay {
		env = append(env, kv[0]+"="+kv[1])
	}
	return env
}

func overlaid(name string, overlay [][2]string) bool {
	for _, kv := range overlay {
		if kv[0] == name {
			return true
		}
	}
	return false
}
