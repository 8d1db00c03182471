package host

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dshdev/dsh/config"
)

// Checks that need the whole deployment, and probes.
//
// Some mistakes in a deployment show only once every plugin has started:
// a tool that asks for a backend type no entry registered (a typo, or a
// backend entry missing). A plugin says what to check with CheckLoaded;
// Start runs those checks after the last plugin started, in load order,
// and the first failure fails the load like any other, naming the entry
// and the line (a FieldError names the field's line).
//
// Other mistakes show only when something is used: an SSH host that
// refuses the connection or whose key is not trusted. A plugin says how to
// try what a first call would do with AddProbe; nothing runs a probe but
// Host.Probe (dsh check --probe).

// CheckLoaded adds a check that runs once every plugin of the deployment
// has started. An error fails the load, located at the plugin's entry,
// or at the field a *FieldError names.
func (c *Context) CheckLoaded(check func(ctx context.Context) error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checks = append(c.checks, check)
}

// Probe tries, for an owner made for it, what a first call would do with
// something the plugin registered (a backend: start a session and close
// it), and returns a short note of what it found.
type Probe struct {
	// Name says what is probed: `backend "ssh"`.
	Name string
	Run  func(ctx context.Context, owner *Owner) (note string, err error)
}

// AddProbe adds a probe of something the plugin registered.
func (c *Context) AddProbe(p Probe) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.probes = append(c.probes, p)
}

// ProbeResult is how one probe went.
type ProbeResult struct {
	File   string // the deployment's source
	Line   int    // the entry's line
	Entry  string // the entry's address
	Plugin string
	Name   string // what was probed
	Note   string // what it found, when it worked
	Took   time.Duration
	Err    error
}

// runChecks runs the plugins' load checks in load order.
func (h *Host) runChecks(ctx context.Context) error {
	h.mu.Lock()
	loaded := append([]*Context(nil), h.loaded...)
	h.mu.Unlock()
	for _, pctx := range loaded {
		pctx.mu.Lock()
		checks := pctx.checks
		pctx.mu.Unlock()
		for _, check := range checks {
			if err := check(ctx); err != nil {
				s := pctx.step
				line := s.Entry.Line
				var fe *config.FieldError
				if errors.As(err, &fe) {
					if l := fieldLine(s.Entry.config, fe.Field); l > 0 {
						line = l
					}
				}
				return &DeploymentError{File: h.plan.Source, Line: line, Entry: s.Entry.Path, Plugin: s.Plugin.Name, Err: err}
			}
		}
	}
	return nil
}

// Probe runs every plugin's probes, one after another in load order, each
// for an owner of its own whose workspace is workdir, closed after it.
func (h *Host) Probe(ctx context.Context, workdir string) []ProbeResult {
	h.mu.Lock()
	loaded := append([]*Context(nil), h.loaded...)
	h.mu.Unlock()
	var out []ProbeResult
	for _, pctx := range loaded {
		pctx.mu.Lock()
		probes := pctx.probes
		pctx.mu.Unlock()
		for i, p := range probes {
			s := pctx.step
			r := ProbeResult{File: h.plan.Source, Line: s.Entry.Line, Entry: s.Entry.Path, Plugin: s.Plugin.Name, Name: p.Name}
			start := time.Now()
			owner, err := h.NewOwner(fmt.Sprintf("probe-%s-%d", s.Entry.Path, i), workdir)
			if err == nil {
				r.Note, r.Err = p.Run(ctx, owner)
				r.Err = errors.Join(r.Err, owner.Close(context.WithoutCancel(ctx)))
			} else {
				r.Err = err
			}
			r.Took = time.Since(start)
			out = append(out, r)
		}
	}
	return out
}
