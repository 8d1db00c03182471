package termapi

import (
	"context"
	"errors"
	"fmt"
)

// Unsupported answers every optional call of a Session with an error that
// wraps errors.ErrUnsupported. A backend embeds it in its session type and
// implements what it can; the calls a later version of the contract adds
// are then answered for it.
type Unsupported struct{}

func unsupported(call string) error {
	return fmt.Errorf("terminal: the session cannot %s: %w", call, errors.ErrUnsupported)
}

// Exec answers that the session does not run commands.
func (Unsupported) Exec(context.Context, ExecRequest) (Send, error) {
	return nil, unsupported("run commands")
}

// Output answers that the session keeps no raw output.
func (Unsupported) Output(context.Context, int64) (Chunk, error) {
	return Chunk{}, unsupported("hand out its raw output")
}

// Resize answers that the session's terminal cannot be resized.
func (Unsupported) Resize(context.Context, Size) error {
	return unsupported("resize its terminal")
}

// EndCommand answers that the session cannot tell what a command started.
func (Unsupported) EndCommand(context.Context) (int, error) {
	return 0, unsupported("end what a command started")
}

// WriteFile answers that the session writes no files for its shell.
func (Unsupported) WriteFile(context.Context, FileRequest) (string, error) {
	return "", unsupported("write files for its shell")
}

// Detach answers that no keeper holds the session.
func (Unsupported) Detach(context.Context) error {
	return unsupported("be kept without its caller")
}

// Resume answers that no keeper holds the session.
func (Unsupported) Resume(context.Context, SendRequest) (Send, error) {
	return nil, unsupported("resume work its caller lost")
}

// UnsupportedLister answers a Backend's List and Attach with errors that
// wrap errors.ErrUnsupported, for a backend that keeps no sessions for
// another caller.
type UnsupportedLister struct{}

// List answers that the backend keeps no list.
func (UnsupportedLister) List(context.Context) ([]Info, error) {
	return nil, fmt.Errorf("terminal: the backend lists no sessions: %w", errors.ErrUnsupported)
}

// Attach answers that the backend hands no session over.
func (UnsupportedLister) Attach(context.Context, string) (Session, error) {
	return nil, fmt.Errorf("terminal: the backend hands no session over: %w", errors.ErrUnsupported)
}
