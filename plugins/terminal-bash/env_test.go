package terminalbash

import (
	"slices"
	"testing"
)

func TestShellEnv(t *testing.T) {
	parent := []string{
		"PATH=/usr/bin:/bin",
		"HOME=/home/u",
		"LANG=C.UTF-8",
		"HTTPS_PROXY=http://proxy:3128",
		"FOO_TOKEN=t",
		"MY_PASSWORD=p",
		"api_key=k",
		"AWS_SECRET_ACCESS_KEY=s",
		"Dsh_Internal=x",
		"DSH_X=x",
		"TERM=xterm-256color",
		"PS1=$ ",
		"malformed",
	}
	env := shellEnv(parent, "owner-1", "pty-7", "hook")
	want := []string{
		"PATH=/usr/bin:/bin",
		"HOME=/home/u",
		"LANG=C.UTF-8",
		"HTTPS_PROXY=http://proxy:3128",
		"TERM=dumb",
		"PAGER=cat",
		"GIT_PAGER=cat",
		"DSH_SHELL=1",
		"DSH_SESSION_ID=owner-1",
		"DSH_PTY_SESSION_ID=pty-7",
		"BASH_SILENCE_DEPRECATION_WARNING=1",
		"PS1=",
		"PS2=",
		"PROMPT_COMMAND=hook",
	}
	if !slices.Equal(env, want) {
		t.Errorf("shellEnv =\n%q\nwant\n%q", env, want)
	}
}
