package backendplugin_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// newSlowResultBackend is the bash backend with the plugin's view of a
// send of slowResultText ahead of the host's: the send's Wait in the plugin
// returns only once the host has cancelled it, so its result is still on
// the way when the Cancel comes. That Cancel waits for the send to settle
// first.
func newSlowResultBackend(ctx context.Context, raw json.RawMessage) (termapi.Backend, error) {
	b, err := newBashBackend(ctx, raw)
	if err != nil {
		return nil, err
	}
	return slowResultBackend{b}, nil
}

type slowResultBackend struct{ termapi.Backend }

func (b slowResultBackend) Spawn(ctx context.Context, spec termapi.SpawnSpec) (termapi.Session, error) {
	s, err := b.Backend.Spawn(ctx, spec)
	if err != nil {
		return nil, err
	}
	return slowResultSession{s}, nil
}

type slowResultSession struct{ termapi.Session }

const slowResultText = "read line"

func (s slowResultSession) StartSend(ctx context.Context, req termapi.SendRequest) (termapi.Send, error) {
	sn, err := s.Session.StartSend(ctx, req)
	if err != nil || req.Text != slowResultText {
		return sn, err
	}
	return &slowResultSend{Send: sn, cancelled: make(chan struct{})}, nil
}

type slowResultSend struct {
	termapi.Send
	cancelled chan struct{}
}

func (sn *slowResultSend) Cancel() bool {
	_, _ = sn.Send.Wait(context.Background())
	defer close(sn.cancelled)
	return sn.Send.Cancel()
}

func (sn *slowResultSend) Wait(ctx context.Context) (termapi.SendResult, error) {
	select {
	case <-sn.cancelled:
	case <-ctx.Done():
		return termapi.SendResult{}, context.Cause(ctx)
	}
	return sn.Send.Wait(ctx)
}

// TestCancelOfASendSettledInThePlugin: a send the plugin settled (a proven
// wait for input) while its result was on its way cannot be cancelled any
// more, and Cancel says so over the protocol as it does in process. A host
// told otherwise would take the program as interrupted while it still
// reads, and type the next command into it.
func TestCancelOfASendSettledInThePlugin(t *testing.T) {
	c := openMode(t, "slow-result", "{}")
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	s, err := c.Spawn(ctx, termapi.SpawnSpec{SessionID: "s1", OwnerID: "o", Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx, "test")
	sn, err := s.StartSend(ctx, termapi.SendRequest{Text: slowResultText, Submit: true})
	if err != nil {
		t.Fatal(err)
	}
	if sn.Cancel() {
		t.Error("Cancel = true for a send the plugin had settled")
	}
	res, err := sn.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != termapi.WaitStdinRead || res.Prompt {
		t.Fatalf("the send settled with %q (prompt %v), want %q: the read still waits", res.Reason, res.Prompt, termapi.WaitStdinRead)
	}
	// The read still waits: the next line is its input, not a command.
	line, err := s.StartSend(ctx, termapi.SendRequest{Text: "the line", Submit: true})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := line.Wait(ctx); err != nil || !res.Prompt {
		t.Fatalf("the line's send settled with %+v, %v; want the prompt after the read", res, err)
	}
	if got := execIn(t, s, `printf '%s\n' "$line"`).Viewport; !strings.Contains(got, "the line") {
		t.Errorf("the read took %q, want the line typed after it", got)
	}
}
