package envpolicy

import (
	"slices"
	"testing"
)

func TestLooksLikeCredential(t *testing.T) {
	for name, want := range map[string]bool{
		"GITHUB_PAT": true, "NPM_CONFIG__AUTH": true, "MYSQL_PWD": true, "CI_JOB_JWT": true,
		"OPENAI_API_KEY": true, "OPENAIAPIKEY": true, "npm_config_//registry.npmjs.org/:_authToken": true,
		"GOOGLE_APPLICATION_CREDENTIALS": true, "DOCKER_AUTH_CONFIG": true, "SLACK_COOKIE": true,
		"PWD": false, "OLDPWD": false, "TOKENIZERS_PARALLELISM": false, "PASSWORD_STORE_DIR": false,
		"GIT_AUTHOR_EMAIL": false, "KEYBOARD_LAYOUT": false, "AWS_SHARED_CREDENTIALS_FILE": false, "GNUPGHOME": false,
	} {
		if got := LooksLikeCredential(name); got != want {
			t.Errorf("LooksLikeCredential(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestForPlugin: a plugin gets dsh's environment without what looks like
// a credential and without the SSH agent, unless passed by name.
func TestForPlugin(t *testing.T) {
	parent := []string{"PATH=/bin", "HOME=/root", "GITHUB_TOKEN=ghp_x", "AWS_SECRET_ACCESS_KEY=k", "AWS_REGION=eu", "SSH_AUTH_SOCK=/run/agent", "DOCKER_HOST=unix:///d.sock", "MYSQL_PWD=pw", "PWD=/work"}
	for _, tt := range []struct {
		pass []string
		want []string
	}{
		{nil, []string{"PATH=/bin", "HOME=/root", "AWS_REGION=eu", "DOCKER_HOST=unix:///d.sock", "PWD=/work"}},
		{[]string{"aws_*", "SSH_AUTH_SOCK"}, []string{"PATH=/bin", "HOME=/root", "AWS_SECRET_ACCESS_KEY=k", "AWS_REGION=eu", "SSH_AUTH_SOCK=/run/agent", "DOCKER_HOST=unix:///d.sock", "PWD=/work"}},
		{[]string{"*"}, parent},
	} {
		if got := ForPlugin(parent, tt.pass); !slices.Equal(got, tt.want) {
			t.Errorf("pass %q:\n got %q\nwant %q", tt.pass, got, tt.want)
		}
	}
}
