package terminalbash

import (
	"strings"
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
// then the overlay (which wins over anything inherited). hook is the
// PROMPT_COMMAND that installs the shell protocol at the first prompt; the
// prompts are empty, so the shell shows nothing between commands.
func shellEnv(parent []string, ownerID, sessionID, hook string) []string {
	overlay := [...][2]string{
		{"TERM", "dumb"},
		{"PAGER", "cat"},
		{"GIT_PAGER", "cat"},
		{"DSH_SHELL", "1"},
		{"DSH_SESSION_ID", ownerID},
		{"DSH_PTY_SESSION_ID", sessionID},
		{"BASH_SILENCE_DEPRECATION_WARNING", "1"},
		{"PS1", ""},
		{"PS2", ""},
		{"PROMPT_COMMAND", hook},
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
