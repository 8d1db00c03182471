package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
	"github.com/dshdev/dsh/plugins/terminal/terminaltest"
)

func newTestBackend(t *testing.T, log string) termapi.Backend {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{"log": log, "shell": map[string]any{"idleSilenceMs": 600000, "disposeGraceMs": 500}})
	b, err := newBackend(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.(*auditBackend).Close(context.Background()) })
	return b
}

// TestConformance: wrapping keeps the contract.
func TestConformance(t *testing.T) {
	terminaltest.TestBackend(t, func(t *testing.T) termapi.Backend {
		return newTestBackend(t, filepath.Join(t.TempDir(), "audit.jsonl"))
	}, terminaltest.Options{
		EchoCommand:     func(text string) string { return "printf '%s\\n' " + strconv.Quote(text) },
		ReadCommand:     "read line",
		ProvesStdinWait: true,
		ExitCommand:     "exit 3",
		StatusCommand:   func(code int) string { return "(exit " + strconv.Itoa(code) + ")" },
		SizeCommand:     "stty size",
		CatCommand:      func(path string) string { return "cat -- '" + path + "'" },
	})
}

func TestAuditLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	b := newTestBackend(t, path)
	ctx := context.Background()
	s, err := b.Spawn(ctx, termapi.SpawnSpec{SessionID: "s1", OwnerID: "agent-7"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx, "test")
	for _, command := range []string{"true", "(exit 4)"} {
		sn, err := s.Exec(ctx, termapi.ExecRequest{Command: command})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sn.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		got = append(got, r)
	}
	want := []struct {
		event, command string
		code           int
	}{{"exec", "true", -1}, {"end", "", 0}, {"exec", "(exit 4)", -1}, {"end", "", 4}}
	if len(got) != len(want) {
		t.Fatalf("log has %d records, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		r := got[i]
		if r.Event != w.event || r.Command != w.command || r.Owner != "agent-7" || r.Session != "s1" {
			t.Errorf("record %d = %+v, want %s %q", i, r, w.event, w.command)
		}
		if w.code >= 0 && (r.ExitCode == nil || *r.ExitCode != w.code) {
			t.Errorf("record %d exit code %v, want %d", i, r.ExitCode, w.code)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, raw := range []string{`{}`, `{"log": "/tmp/x", "colour": 1}`, `{"log": "/tmp/x", "shell": {"rows": -1}}`, `{"log": "/nonexistent/dir/x"}`} {
		if b, err := newBackend(context.Background(), json.RawMessage(raw)); err == nil {
			b.(*auditBackend).Close(context.Background())
			t.Errorf("config %s accepted", raw)
		}
	}
}
