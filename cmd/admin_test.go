//go:build linux

package dshcmd

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// dshSessions runs dsh sessions with args in env and returns its output.
func dshSessions(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(dshBinary(t), append([]string{"sessions"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("dsh sessions %q: %v\n%s", args, err, out)
	}
	return string(out)
}

// sessionsJSON lists the sessions of every running server, by id.
func sessionsJSON(t *testing.T, env []string) map[string]adminEntry {
	t.Helper()
	var infos []serverInfo
	out := dshSessions(t, env, "--json")
	if err := json.Unmarshal([]byte(out), &infos); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	m := map[string]adminEntry{}
	for _, info := range infos {
		for _, s := range info.Sessions {
			m[s.Session] = s
		}
	}
	return m
}

// waitSessions polls dsh sessions until ok holds (an operator's view: it
// has no event to wait on), within a generous deadline.
func waitSessions(t *testing.T, env []string, what string, ok func(map[string]adminEntry) bool) map[string]adminEntry {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		m := sessionsJSON(t, env)
		if ok(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("dsh sessions never showed %s: %+v", what, m)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestE2ESessionsAndAudit: an operator lists the sessions of the running
// servers (HTTP and stdio), with what each runs, its shell's pid and
// current directory, ends one, and finds every call in the audit log, with
// its exit status and commands redacted as asked.
func TestE2ESessionsAndAudit(t *testing.T) {
	runtime := t.TempDir()
	env := []string{"XDG_RUNTIME_DIR=" + runtime}
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	work := t.TempDir()
	d := startHTTPEnv(t, env, "--workdir", work, "--token-file", writeTokenFileFor(t), "--audit-log", auditPath, "--audit-redact", `secret=\S+`)
	d.client.Transport = bearer{testToken, d.client.Transport}

	a := d.connect(t)
	defer a.Close()
	bash(t, a, "echo hi")
	bash(t, a, "cd / && false")
	bash(t, a, "echo secret=hunter2 >/dev/null")
	b := d.connect(t)
	defer b.Close()
	pidB, _ := bash(t, b, "echo $$")
	errc := make(chan error, 1)
	go func() {
		_, err := b.CallTool(t.Context(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "sleep 300"}})
		errc <- err
	}()

	// A stdio server of the same user is listed too.
	stdio := exec.Command(dshBinary(t), "serve", "--workdir", work)
	stdio.Env = append(os.Environ(), env...)
	in, _ := stdio.StdinPipe()
	out, _ := stdio.StdoutPipe()
	if err := stdio.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); stdio.Wait() }()
	sc, err := newE2EClient().Connect(t.Context(), &mcp.IOTransport{Reader: out, Writer: in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	bash(t, sc, "cd /tmp")

	m := waitSessions(t, env, "the sleep running", func(m map[string]adminEntry) bool {
		for _, s := range m {
			if s.Running != nil && s.Running.Command == "sleep 300" {
				return true
			}
		}
		return false
	})
	var idA, idB string
	for id, s := range m {
		switch {
		case s.Running != nil:
			idB = id
			if len(s.Shells) != 1 || fmt.Sprint(s.Shells[0].PID) != pidB || s.Owner != "token-"+testTokenID(t) || s.Transport != "http" {
				t.Errorf("the sleeping session: %+v, want shell %s", s, pidB)
			}
		case s.Transport == "http":
			idA = id
			if s.Calls != 3 || len(s.Shells) != 1 || s.Shells[0].Cwd != "/" || s.Client != "dsh-e2e v0" {
				t.Errorf("session a: %+v", s)
			}
		case s.Transport == "stdio":
			if len(s.Shells) != 1 || s.Shells[0].Cwd != "/tmp" || s.Owner != "stdio" {
				t.Errorf("the stdio session: %+v", s)
			}
		}
	}
	if len(m) != 3 || idA == "" || idB == "" {
		t.Fatalf("sessions: %+v", m)
	}
	text := dshSessions(t, env)
	if !strings.Contains(text, idB) || !strings.Contains(text, "bash for ") || !strings.Contains(text, ": sleep 300") || !strings.Contains(text, "SHELL PID") {
		t.Errorf("dsh sessions:\n%s", text)
	}

	// Ending b cancels its call and closes its shell.
	if got := dshSessions(t, env, "end", idB); !strings.HasPrefix(got, "ended "+idB) {
		t.Fatalf("end: %q", got)
	}
	if err := recv(t, errc, "the ended session's call to return"); err == nil {
		t.Fatal("the ended session's call succeeded")
	}
	var pid int
	fmt.Sscan(pidB, &pid)
	assertGone(t, pid)
	if m := sessionsJSON(t, env); len(m) != 2 {
		t.Errorf("after end: %+v", m)
	}

	// The audit log: one line per call, redacted, with exit codes.
	f, err := os.Open(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type rec struct {
		Session, Owner, Client, Tool, Command, Outcome, Ended string
		ExitCode                                              *int
		DurationMs                                            float64
		OutputBytes                                           int
		Time                                                  time.Time
	}
	var recs []rec
	sc2 := bufio.NewScanner(f)
	for sc2.Scan() {
		var r rec
		if err := json.Unmarshal(sc2.Bytes(), &r); err != nil {
			t.Fatalf("%v in %s", err, sc2.Text())
		}
		recs = append(recs, r)
	}
	byCommand := map[string]rec{}
	for _, r := range recs {
		byCommand[r.Command] = r
	}
	for _, want := range []struct {
		command, outcome string
		exit             int
	}{
		{"echo hi", "ok", 0},
		{"cd / && false", "ok", 1},
		{"echo [REDACTED] >/dev/null", "ok", 0},
		{"sleep 300", "cancelled", -1},
	} {
		r, ok := byCommand[want.command]
		switch {
		case !ok:
			t.Errorf("no audit record of %q in %+v", want.command, recs)
		case r.Outcome != want.outcome || r.Tool != "bash" || r.Owner != "token-"+testTokenID(t) || r.Client != "dsh-e2e v0" || r.Time.IsZero() || r.DurationMs <= 0:
			t.Errorf("%q: %+v", want.command, r)
		case want.exit >= 0 && (r.ExitCode == nil || *r.ExitCode != want.exit):
			t.Errorf("%q: exit code %v, want %d", want.command, r.ExitCode, want.exit)
		}
	}
	if r := byCommand["echo hi"]; r.Session != idA || r.OutputBytes != 2 {
		t.Errorf("echo hi: %+v (session a is %s)", r, idA)
	}
	if strings.Contains(fmt.Sprint(recs), "hunter2") {
		t.Errorf("the secret reached the log: %+v", recs)
	}
}

// writeTokenFileFor writes testToken to a private token file.
func writeTokenFileFor(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(p, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// testTokenID is the identity dsh gives testToken: a digest prefix.
func testTokenID(t *testing.T) string {
	t.Helper()
	d := sha256.Sum256([]byte(testToken))
	return hex.EncodeToString(d[:6])
}
