//go:build linux

package terminalbash

import (
	"slices"
	"strings"
	"testing"
)

// overlay is what shellEnv appends for owner-1, pty-7 and hook "hook".
var overlay = []string{
	"TERM=dumb",
	"PAGER=cat",
	"GIT_PAGER=cat",
	"DSH_SHELL=1",
	"DSH_SESSION_ID=owner-1",
	"DSH_PTY_SESSION_ID=pty-7",
	"BASH_SILENCE_DEPRECATION_WARNING=1",
	"HISTFILE=",
	"PS1=",
	"PS2=",
	"PROMPT_COMMAND=hook",
}

// parent is an environment of the kinds of variable the policy judges.
var parent = []string{
	"PATH=/usr/bin:/bin",
	"HOME=/home/u",
	"LANG=C.UTF-8",
	"LC_ALL=C.UTF-8",
	"PWD=/home/u/src",
	"OLDPWD=/home/u",
	"EDITOR=vi",
	"GIT_AUTHOR_NAME=A U Thor",
	"TOKENIZERS_PARALLELISM=false",
	"PASSWORD_STORE_DIR=/home/u/.pass",
	"HTTPS_PROXY=http://proxy:3128",
	"HTTP_PROXY=http://bob:hunter2@proxy:3128",
	"DATABASE_URL=postgres://app:s3cret@db:5432/app?sslmode=disable",
	"FOO_TOKEN=t",
	"GITHUB_PAT=ghp_x",
	"GITHUBTOKEN=ghp_y",
	"NPM_CONFIG__AUTH=dXNlcjpwYXNz",
	"MYSQL_PWD=p",
	"CI_JOB_JWT=eyJ",
	"MY_PASSWORD=p",
	"api_key=k",
	"AWS_SECRET_ACCESS_KEY=s",
	"AWS_SESSION_TOKEN=s",
	"SSH_AUTH_SOCK=/tmp/ssh-x/agent.1",
	"SSH_AGENT_PID=42",
	"Dsh_Internal=x",
	"DSH_X=x",
	"TERM=xterm-256color",
	"PS1=$ ",
	"PROMPT_COMMAND=history -a",
	"malformed",
}

func TestShellEnvPolicy(t *testing.T) {
	kept := []string{
		"PATH=/usr/bin:/bin",
		"HOME=/home/u",
		"LANG=C.UTF-8",
		"LC_ALL=C.UTF-8",
		"PWD=/home/u/src",
		"OLDPWD=/home/u",
		"EDITOR=vi",
		"GIT_AUTHOR_NAME=A U Thor",
		"TOKENIZERS_PARALLELISM=false",
		"PASSWORD_STORE_DIR=/home/u/.pass",
		"HTTPS_PROXY=http://proxy:3128",
		"HTTP_PROXY=http://bob@proxy:3128",
		"DATABASE_URL=postgres://app@db:5432/app?sslmode=disable",
	}
	tests := []struct {
		name string
		edit func(*EnvPolicy)
		want []string // before the overlay
	}{
		{"default", func(*EnvPolicy) {}, kept},
		{"core", func(p *EnvPolicy) { p.Inherit = InheritCore }, []string{"PATH=/usr/bin:/bin", "HOME=/home/u", "LANG=C.UTF-8", "LC_ALL=C.UTF-8"}},
		{"none, with set", func(p *EnvPolicy) {
			p.Inherit = InheritNone
			p.Set = map[string]string{"PATH": "/opt/bin", "CI": "1"}
		}, []string{"CI=1", "PATH=/opt/bin"}},
		{"exclude globs, any case", func(p *EnvPolicy) { p.Exclude = []string{"*_proxy", "LC_*", "EDITOR"} }, without(kept, "HTTPS_PROXY", "HTTP_PROXY", "LC_ALL", "EDITOR")},
		{"include only", func(p *EnvPolicy) {
			p.IncludeOnly = []string{"PATH", "HOME", "X"}
			p.Set = map[string]string{"X": "1", "Y": "2"}
		}, []string{"PATH=/usr/bin:/bin", "HOME=/home/u", "X=1"}},
		{"set replaces in place of the inherited", func(p *EnvPolicy) { p.Set = map[string]string{"EDITOR": "nano"} }, append(without(kept, "EDITOR"), "EDITOR=nano")},
		{"ssh agent opt-in", func(p *EnvPolicy) { p.SSHAgent = true }, insertAfter(kept, "DATABASE_URL", "SSH_AUTH_SOCK=/tmp/ssh-x/agent.1", "SSH_AGENT_PID=42")},
		{"URL credentials kept", func(p *EnvPolicy) { p.KeepURLCredentials = true }, replace(kept, "HTTP_PROXY=http://bob:hunter2@proxy:3128", "DATABASE_URL=postgres://app:s3cret@db:5432/app?sslmode=disable")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := defaultEnvPolicy()
			tt.edit(&p)
			got := shellEnv(&p, parent, "owner-1", "pty-7", "hook")
			want := append(slices.Clone(tt.want), overlay...)
			if !slices.Equal(got, want) {
				t.Errorf("got\n%q\nwant\n%q", got, want)
			}
		})
	}
	// Without the default excludes, credentials pass, but never dsh's own
	// variables or the SSH agent.
	p := defaultEnvPolicy()
	p.DefaultExcludes = false
	got := strings.Join(shellEnv(&p, parent, "owner-1", "pty-7", "hook"), "\n")
	if !strings.Contains(got, "GITHUB_PAT=ghp_x") || strings.Contains(got, "DSH_X") || strings.Contains(got, "Dsh_Internal") || strings.Contains(got, "SSH_AUTH_SOCK") {
		t.Errorf("without default excludes:\n%s", got)
	}
}

func without(env []string, names ...string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(names, name)
	})
}

func insertAfter(env []string, name string, kvs ...string) []string {
	i := slices.IndexFunc(env, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
	return slices.Insert(slices.Clone(env), i+1, kvs...)
}

func replace(env []string, kvs ...string) []string {
	out := slices.Clone(env)
	for _, kv := range kvs {
		name, _, _ := strings.Cut(kv, "=")
		out[slices.IndexFunc(out, func(e string) bool { return strings.HasPrefix(e, name+"=") })] = kv
	}
	return out
}

// TestShellGetsThePolicysEnvironment: a real shell sees what the policy
// passes on, and the protocol still works with an environment of nothing
// but Set.
func TestShellGetsThePolicysEnvironment(t *testing.T) {
	b := newTestBackend(t, func(c *Config) {
		c.Env.Inherit = InheritNone
		c.Env.Set = map[string]string{"PATH": "/usr/bin:/bin", "GREETING": "hi"}
	})
	b.environ = func() []string { return parent }
	s := spawn(t, b, t.TempDir())
	out, _ := mustExec(t, s, `compgen -e | grep -vx _ | sort; echo "$GREETING $PATH"`)
	want := []string{
		"BASH_SILENCE_DEPRECATION_WARNING", "DSH_PTY_SESSION_ID", "DSH_SESSION_ID", "DSH_SHELL", "GIT_PAGER", "GREETING",
		"PAGER", "PATH", "PROMPT_COMMAND", "PWD", "SHLVL", "TERM",
		"hi", "/usr/bin:/bin",
	}
	if got := strings.Fields(out); !slices.Equal(got, want) {
		t.Fatalf("the shell's environment:\n%q\nwant\n%q", got, want)
	}
}
