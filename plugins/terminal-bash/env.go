//go:build linux

package terminalbash

import (
	"maps"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/dshdev/dsh/internal/envpolicy"

	"github.com/dshdev/dsh/config"
)

// EnvPolicy says which of dsh's environment variables a shell gets. The
// steps run in this order: Inherit picks the starting set; the default
// excludes, then Exclude, drop names; credentials are stripped from URL
// values; Set adds or replaces variables; IncludeOnly, if given, keeps only
// the names it matches. dsh's own variables (TERM, PAGER, PS1, the
// protocol's PROMPT_COMMAND, DSH_*) come last and always win.
type EnvPolicy struct {
	// Inherit is the starting set: "all" of dsh's environment, "core"
	// (PATH, HOME, USER, USERNAME, LOGNAME, SHELL, TMPDIR, TEMP, TMP, LANG,
	// LANGUAGE, LC_*, TZ) or "none".
	Inherit string `json:"inherit" jsonschema:"enum=all,enum=core,enum=none"`
	// DefaultExcludes drops variables whose names say they hold a
	// credential: a word (the name split at anything but letters and
	// digits) such as KEY, TOKEN, SECRET, PASSWORD, PASSWD, PWD, PAT, JWT,
	// AUTH or CREDENTIALS, or a last word ending in TOKEN, SECRET, PASSWORD
	// or APIKEY. A name whose last word is DIR, DIRS, PATH, FILE or HOME
	// names a place, not a secret, and is kept (PASSWORD_STORE_DIR).
	DefaultExcludes bool `json:"defaultExcludes"`
	// Exclude drops the names matching any of these globs (* and ?, case
	// insensitive): "AWS_*", "*_ENDPOINT".
	Exclude []string `json:"exclude"`
	// KeepURLCredentials keeps a password in a URL value
	// (DATABASE_URL=postgres://u:p@db/x, HTTPS_PROXY=http://u:p@proxy);
	// by default the password is removed and the user name kept.
	KeepURLCredentials bool `json:"keepUrlCredentials"`
	// SSHAgent passes SSH_AUTH_SOCK and SSH_AGENT_PID, which let a command
	// sign with every key of the user's agent.
	SSHAgent bool `json:"sshAgent"`
	// Set adds these variables, or replaces inherited ones.
	Set map[string]string `json:"set"`
	// IncludeOnly, when not empty, keeps only the names matching one of
	// these globs, Set's included.
	IncludeOnly []string `json:"includeOnly"`
}

// Inherit values.
const (
	InheritAll  = "all"
	InheritCore = "core"
	InheritNone = "none"
)

func defaultEnvPolicy() EnvPolicy {
	return EnvPolicy{Inherit: InheritAll, DefaultExcludes: true}
}

// coreNames are what Inherit "core" keeps.
var coreNames = []string{"PATH", "HOME", "USER", "USERNAME", "LOGNAME", "SHELL", "TMPDIR", "TEMP", "TMP", "LANG", "LANGUAGE", "LC_*", "TZ"}

// stripURLCredentials removes the password from a URL value, keeping the
// user name; other values come back unchanged.
func stripURLCredentials(value string) string {
	if !strings.Contains(value, "://") || !strings.Contains(value, "@") {
		return value
	}
	u, err := url.Parse(value)
	if err != nil || u.User == nil {
		return value
	}
	if _, hasPassword := u.User.Password(); !hasPassword {
		return value
	}
	u.User = url.User(u.User.Username())
	return u.String()
}

// validate reports the first invalid field of p, named under prefix.
func (p *EnvPolicy) validate(prefix string) error {
	switch p.Inherit {
	case InheritAll, InheritCore, InheritNone:
	default:
		return config.FieldErrorf(prefix+".inherit", "terminal-bash: %s.inherit must be one of all, core, none; got %q", prefix, p.Inherit)
	}
	for _, list := range []struct {
		field string
		globs []string
	}{{"exclude", p.Exclude}, {"includeOnly", p.IncludeOnly}} {
		for _, g := range list.globs {
			if _, err := path.Match(g, ""); err != nil || g == "" {
				return config.FieldErrorf(prefix+"."+list.field, "terminal-bash: %s.%s: %q is not a valid glob", prefix, list.field, g)
			}
		}
	}
	for name, value := range p.Set {
		switch {
		case name == "" || strings.ContainsAny(name, "=\x00"):
			return config.FieldErrorf(prefix+".set", "terminal-bash: %s.set: %q is not a variable name", prefix, name)
		case strings.IndexByte(value, 0) >= 0:
			return config.FieldErrorf(prefix+".set", "terminal-bash: %s.set: the value of %s contains a NUL byte", prefix, name)
		case ownVariable(name):
			return config.FieldErrorf(prefix+".set", "terminal-bash: %s.set cannot set %s: dsh sets it for the shell protocol", prefix, name)
		}
	}
	return nil
}

// ownVariable reports whether dsh sets name itself, for every shell.
func ownVariable(name string) bool {
	return strings.HasPrefix(strings.ToUpper(name), "DSH_") || overlaid(name, overlayNames[:])
}

// overlayNames are the variables of shellEnv's overlay.
var overlayNames = [...]string{"TERM", "PAGER", "GIT_PAGER", "BASH_SILENCE_DEPRECATION_WARNING", "HISTFILE", "PS1", "PS2", "PROMPT_COMMAND"}

func overlaid(name string, names []string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// apply returns the variables of parent the policy passes on, then Set.
func (p *EnvPolicy) apply(parent []string) []string {
	env := make([]string, 0, len(parent)+len(p.Set))
	for _, kv := range parent {
		name, value, ok := strings.Cut(kv, "=")
		switch {
		case !ok || name == "" || ownVariable(name):
			continue
		case p.Inherit == InheritNone, p.Inherit == InheritCore && !envpolicy.MatchAny(coreNames, name):
			continue
		case name == "SSH_AUTH_SOCK" || name == "SSH_AGENT_PID":
			if !p.SSHAgent {
				continue
			}
		case p.DefaultExcludes && envpolicy.LooksLikeCredential(name), envpolicy.MatchAny(p.Exclude, name):
			continue
		}
		if _, set := p.Set[name]; set {
			continue
		}
		if !p.KeepURLCredentials {
			value = stripURLCredentials(value)
		}
		env = append(env, name+"="+value)
	}
	for _, name := range slices.Sorted(maps.Keys(p.Set)) {
		env = append(env, name+"="+p.Set[name])
	}
	if len(p.IncludeOnly) > 0 {
		kept := env[:0]
		for _, kv := range env {
			name, _, _ := strings.Cut(kv, "=")
			if envpolicy.MatchAny(p.IncludeOnly, name) {
				kept = append(kept, kv)
			}
		}
		env = kept
	}
	return env
}

// shellEnv builds the shell's environment: what the policy passes on of
// parent, then the overlay (which wins over everything). hook is the
// PROMPT_COMMAND that installs the shell protocol at the first prompt; the
// prompts are empty, so the shell shows nothing between commands.
func shellEnv(policy *EnvPolicy, parent []string, ownerID, sessionID, hook string) []string {
	env := policy.apply(parent)
	return append(env,
		"TERM=dumb",
		"PAGER=cat",
		"GIT_PAGER=cat",
		"DSH_SHELL=1",
		"DSH_SESSION_ID="+ownerID,
		"DSH_PTY_SESSION_ID="+sessionID,
		"BASH_SILENCE_DEPRECATION_WARNING=1",
		// No history file: the user's is not the agent's to read, and
		// bash would rewrite it at its exit, cut to 500 lines. The
		// plumbing unsets it, so that what the agent starts inherits none.
		"HISTFILE=",
		"PS1=",
		"PS2=",
		"PROMPT_COMMAND="+hook,
	)
}
