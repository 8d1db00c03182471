package backendkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// Core is the part of a session that every engine keeps the same way: its
// name in errors, its screen, the status of its top-level process, and the
// lock that guards them (the session's own). An engine embeds it and gets
// the termapi.Session methods that do not depend on how the shell is
// reached: Status, Read and Output.
type Core struct {
	// Who starts every error of the session: "terminal-bash: session
	// pty-…". It names the backend and the session once.
	Who string
	// Scr is what the terminal has shown.
	Scr *Screen

	mu      *sync.Mutex
	status  *termapi.Status
	maxRead int
	timeout time.Duration
}

// CoreConfig is what a Core is made of.
type CoreConfig struct {
	// Who starts every error of the session (Core.Who).
	Who string
	// MaxRead bounds a page, a viewport, and the lines no send has
	// claimed; ScrollLines and ScrollBytes the scrollback.
	MaxRead, ScrollLines, ScrollBytes int
	// Timeout bounds a send that does not set its own bound.
	Timeout time.Duration
}

// Init sets up the core of a session whose lock is mu and whose top-level
// status is *status.
func (c *Core) Init(mu *sync.Mutex, status *termapi.Status, cfg CoreConfig) {
	c.mu, c.status, c.Who, c.maxRead, c.timeout = mu, status, cfg.Who, cfg.MaxRead, cfg.Timeout
	c.Scr = NewScreen(cfg.MaxRead, cfg.ScrollLines, cfg.ScrollBytes)
}

// Deadline is when a send that starts at now and asks for bound d (zero:
// the session's own) must have settled.
func (c *Core) Deadline(now time.Time, d time.Duration) time.Time {
	if d <= 0 {
		d = c.timeout
	}
	return now.Add(d)
}

// Status reports whether the top-level process is still running.
func (c *Core) Status() termapi.Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return *c.status
}

// Read returns a page of scrollback, counted back from the newest line.
func (c *Core) Read(req termapi.ReadRequest) (termapi.ReadResult, error) {
	c.mu.Lock()
	res, err := c.Scr.Read(req, c.maxRead)
	c.mu.Unlock()
	if err != nil {
		return res, c.Errorf("%w", err)
	}
	return res, nil
}

// Output returns the terminal's raw output from position from on.
func (c *Core) Output(ctx context.Context, from int64) (termapi.Chunk, error) {
	return c.Scr.Raw.Read(ctx, from)
}

// ResizeWith is a session's Resize: it checks size, and that the session
// is usable (usable runs under the lock), then has the transport resize
// the terminal.
func (c *Core) ResizeWith(size termapi.Size, usable func() error, resize func(termapi.Size) error) error {
	if err := size.Validate(); err != nil {
		return c.Errorf("%w", err)
	}
	c.mu.Lock()
	err := usable()
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if err := resize(size); err != nil {
		return c.Errorf("resize: %w", err)
	}
	return nil
}

// Errorf formats an error of the session: Who, then the message.
func (c *Core) Errorf(format string, args ...any) error {
	return fmt.Errorf(c.Who+": "+format, args...)
}

// Unusable is why nothing new may start on a session that is closing or
// whose shell has exited, or nil. The caller holds the lock.
func (c *Core) Unusable(closing, exited bool) error {
	switch {
	case closing:
		return c.Errorf("%w", termapi.ErrSessionClosing)
	case exited:
		return c.Errorf("%w (%s)", termapi.ErrSessionExited, *c.status)
	}
	return nil
}

// Gate is why a send may not start now, or nil: its caller has given up,
// the session starts nothing new (unusable, see Unusable), or another send
// holds the slot (busy says why; empty when the slot is free). The caller
// holds the lock.
func (c *Core) Gate(ctx context.Context, unusable error, busy string) error {
	switch {
	case ctx.Err() != nil:
		return c.Errorf("send not started: %w", context.Cause(ctx))
	case unusable != nil:
		return unusable
	case busy != "":
		return c.Errorf("%w (%s)", termapi.ErrSendActive, busy)
	}
	return nil
}

// ExecGate is why req may not start as a command now, or nil: a command no
// shell can run as one unit, its caller has given up, what keeps any send
// from starting (see Gate), or a shell not idle at its prompt. The caller
// holds the lock.
func (c *Core) ExecGate(ctx context.Context, req termapi.ExecRequest, unusable error, busy string, idle bool) error {
	switch {
	case req.Command == "":
		return c.Errorf("exec: empty command")
	case strings.IndexByte(req.Command, 0) >= 0:
		return c.Errorf("exec: the command contains a NUL byte")
	case ctx.Err() != nil:
		return c.Errorf("exec not started: %w", context.Cause(ctx))
	}
	if err := c.Gate(ctx, unusable, busy); err != nil {
		return err
	}
	if !idle {
		return c.Errorf("%w", termapi.ErrShellBusy)
	}
	return nil
}

// Input is what a send types: its text, and Enter (a carriage return)
// when it submits.
func Input(req termapi.SendRequest) []byte {
	text := []byte(req.Text)
	if req.Submit {
		text = append(text, '\r')
	}
	return text
}

// Nonce returns 64 random bits in hex: a command's nonce, typed on its
// line and nowhere else, so that only that line can report its end.
func Nonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b[:])
}

// Detach answers that no keeper holds the session: a session of an engine
// is its caller's. A keeper (package backendplugin) keeps sessions around
// their engine.
func (c *Core) Detach(context.Context) error {
	return c.Errorf("no keeper holds the session: %w", errors.ErrUnsupported)
}

// Resume answers that no keeper holds the session (see Detach).
func (c *Core) Resume(context.Context, termapi.SendRequest) (termapi.Send, error) {
	return nil, c.Errorf("no keeper holds the session: %w", errors.ErrUnsupported)
}

// TakeBackground takes the complete lines no send has claimed (what
// background jobs printed between sends), and whether older ones were
// dropped past the bound: a keeper moves them to its journal while no
// caller holds the session, so that they are not bounded by the
// session's memory. The line still being written stays, for the next send.
func (c *Core) TakeBackground() (text string, dropped bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Scr.Unclaimed.Take(), c.Scr.Unclaimed.TakeDropped()
}
