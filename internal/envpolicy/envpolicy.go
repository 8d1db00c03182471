// Package envpolicy holds what dsh's environment policies share: which
// variable names look like credentials (the default excludes), and glob
// matching of names. terminal-bash's env policy applies it to shells;
// ForPlugin applies it to backend plugin processes, which run as dsh's
// user and pass their environment on to their shells.
//
// A name looks like a credential when one of its words (the name split at
// anything but letters and digits) is KEY, TOKEN, SECRET, PASSWORD,
// PASSWD, PWD, PAT, JWT, AUTH, CREDENTIALS, ... (GITHUB_PAT,
// NPM_CONFIG__AUTH, MYSQL_PWD), or its last word ends in one
// (GITHUBTOKEN). A last word DIR, DIRS, PATH, FILE or HOME names a place
// and is kept (PASSWORD_STORE_DIR), and so are PWD and OLDPWD.
package envpolicy

import (
	"fmt"
	"path"
	"strings"
)

// credentialWords are the name words that mark a credential.
var credentialWords = map[string]bool{
	"KEY": true, "KEYS": true, "APIKEY": true, "SECRET": true, "SECRETS": true,
	"TOKEN": true, "TOKENS": true, "AUTHTOKEN": true, "PASSWORD": true, "PASSWORDS": true,
	"PASSWD": true, "PASSPHRASE": true, "PWD": true, "PAT": true, "JWT": true,
	"AUTH": true, "CREDENTIAL": true, "CREDENTIALS": true, "CREDS": true, "COOKIE": true,
}

// credentialSuffixes catch words run together (GITHUBTOKEN, OPENAIAPIKEY).
var credentialSuffixes = []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY"}

// placeWords, as a name's last word, make it a location, not a secret.
var placeWords = map[string]bool{"DIR": true, "DIRS": true, "PATH": true, "FILE": true, "HOME": true}

// LooksLikeCredential reports whether a variable name says it holds a
// credential: the env policy's default exclude (see package doc).
func LooksLikeCredential(name string) bool {
	upper := strings.ToUpper(name)
	if upper == "PWD" || upper == "OLDPWD" {
		return false // the current and previous directory
	}
	words := strings.FieldsFunc(upper, func(r rune) bool {
		return (r < 'A' || r > 'Z') && (r < '0' || r > '9')
	})
	if len(words) == 0 || placeWords[words[len(words)-1]] {
		return false
	}
	for _, w := range words {
		if credentialWords[w] {
			return true
		}
	}
	last := words[len(words)-1]
	for _, s := range credentialSuffixes {
		if strings.HasSuffix(last, s) {
			return true
		}
	}
	return false
}

// MatchAny reports whether name matches one of the globs (path.Match
// syntax), ignoring case. A malformed glob matches nothing; check globs
// with ValidGlob first.
func MatchAny(globs []string, name string) bool {
	upper := strings.ToUpper(name)
	for _, g := range globs {
		if ok, _ := path.Match(strings.ToUpper(g), upper); ok {
			return true
		}
	}
	return false
}

// ValidGlob reports whether g is a glob MatchAny can use.
func ValidGlob(g string) error {
	if _, err := path.Match(g, ""); err != nil || g == "" {
		return fmt.Errorf("%q is not a valid glob", g)
	}
	return nil
}

// SSHAgentVars are the variables that let a process sign with every key of
// the user's SSH agent; the policies pass them only when asked.
var SSHAgentVars = []string{"SSH_AUTH_SOCK", "SSH_AGENT_PID"}

// ForPlugin is the environment of a backend plugin process: parent (dsh's
// own) without the names that look like credentials and without the SSH
// agent's, except those matching one of the pass globs.
func ForPlugin(parent []string, pass []string) []string {
	env := make([]string, 0, len(parent))
	for _, kv := range parent {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		agent := name == SSHAgentVars[0] || name == SSHAgentVars[1]
		if (agent || LooksLikeCredential(name)) && !MatchAny(pass, name) {
			continue
		}
		env = append(env, kv)
	}
	return env
}
