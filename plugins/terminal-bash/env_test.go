package terminalbash

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
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
	env := shellEnv(parent, "owner-1", "pty-7")
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
		"PS1=" + promptText,
		"PROMPT_COMMAND=" + promptCommand,
	}
	if !slices.Equal(env, want) {
		t.Errorf("shellEnv =\n%q\nwant\n%q", env, want)
	}
}

// TestPromptMarkerCarriesStatus runs bash with the controlled environment
// on a bare PTY, in the C locale, and checks the raw bytes: exactly one
// marker per prompt, carrying the status of the command before it; $? is
// intact after the prompt; PS1 is repaired; without PROMPT_COMMAND the
// prompt is bare.
func TestPromptMarkerCarriesStatus(t *testing.T) {
	term, err := openTerminal(24, 80)
	if err != nil {
		t.Fatal(err)
	}
	defer term.close()
	cmd, err := startShell("/bin/bash", defaultShellArgs(), shellEnv([]string{"PATH=" + os.Getenv("PATH")}, "o", "s"), "", term.slave, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	term.master.SetDeadline(time.Now().Add(waitLong))

	var seen []byte
	readUntil := func(want string) {
		t.Helper()
		buf := make([]byte, 4096)
		for !bytes.Contains(seen, []byte(want)) {
			n, err := term.master.Read(buf)
			if err != nil {
				t.Fatalf("waiting for %q in %q: %v", want, seen, err)
			}
			seen = append(seen, buf[:n]...)
		}
	}
	marker := func(status string) string { return "\x1b]133;D;" + status + "\a" + promptText }
	readUntil(marker("0"))
	for _, step := range []struct{ input, want string }{
		{"(exit 7)", marker("7")},
		{"PS1=broken; false", marker("1")},
		{"(exit 4); echo $?", "4\r\n" + marker("0")},
		{"PROMPT_COMMAND=; (exit 3)", "\r\n" + promptText},
	} {
		seen = seen[:0]
		if _, err := term.master.Write([]byte(step.input + "\r")); err != nil {
			t.Fatal(err)
		}
		readUntil(step.want)
		if n, want := strings.Count(string(seen), "\x1b]133;D;"), strings.Count(step.want, "\x1b]133;D;"); n != want {
			t.Errorf("after %q: %d markers in %q, want %d", step.input, n, seen, want)
		}
	}
}
