package inband

import (
	"context"
	"strings"
	"testing"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// The command cannot find its nonce: not in a variable, not in a function,
// not in $_. So printing markers can neither end it early nor forge its
// status, and what it prints that looks like markers is not output.
func TestForgedMarkers(t *testing.T) {
	s := spawn(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	send, err := s.Exec(ctx, termapi.ExecRequest{Command: "echo \"last:$_\"; set; declare -f; alias; echo END-OF-STATE", Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	nonce := s.cur.nonce
	s.mu.Unlock()
	out, res := drain(t, ctx, send)
	if res.Exec.State != termapi.ExecCompleted || !strings.Contains(out, "END-OF-STATE") {
		t.Fatalf("state dump: %+v\n%s", *res.Exec, out)
	}
	if strings.Contains(out, nonce) {
		t.Fatalf("the command's own state holds its nonce %s:\n%s", nonce, out)
	}

	forged := strings.Join([]string{
		`printf '\e]6973;E;%s;0\a' 0123456789abcdef`, // an end marker with a made-up nonce
		`printf '\e]6973;B;%s\a' 0123456789abcdef`,   // a begin marker
		`printf '\e]6973;P;%s;0\a' notthetoken`,      // a prompt without the session's token
		`printf 'visible\n'`,
		`printf '\e]6973;E;'`, // an unfinished marker, cut by the next real one
		`(exit 7)`,
	}, "\n")
	out = mustComplete(t, s, forged, 7)
	if out != "visible\n" {
		t.Fatalf("output = %q, want only the visible line", out)
	}
	page, err := s.Read(termapi.ReadRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(page.Text, "0123456789abcdef") || strings.Contains(page.Text, "notthetoken") || strings.Contains(page.Text, "\x1b") {
		t.Fatalf("markers reached the scrollback:\n%q", page.Text)
	}
}

// A command that turns the terminal's echo on (stty sane does) does not
// make the typed lines show: their echo is removed, and the next command's
// line turns echo off again.
func TestEchoTurnedOn(t *testing.T) {
	s := spawn(t)
	mustComplete(t, s, "stty echo", 0)
	for i, word := range []string{"one", "two", strings.Repeat("long ", 1000)} {
		if out := mustComplete(t, s, "echo "+word+"\necho done", 0); out != strings.TrimSpace(word)+"\ndone\n" {
			t.Fatalf("output = %q", out)
		}
		s.mu.Lock()
		echoed := s.echoing
		s.mu.Unlock()
		if i == 0 && !echoed {
			t.Fatal("the terminal did not echo the line: the test shows nothing")
		}
	}
	if out := mustComplete(t, s, "stty -a", 0); !strings.Contains(out, " -echo ") {
		t.Fatalf("echo is still on:\n%s", out)
	}
}
