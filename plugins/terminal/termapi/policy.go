package termapi

import (
	"fmt"
	"slices"
	"strings"
)

// Policy is what a session must run under. It travels in the spawn spec;
// a backend refuses what of it it cannot enforce (Check), and the service
// refuses a session whose capabilities fall short of what was asked.
type Policy struct {
	// Sandbox is the sandbox mode; empty: the backend's own.
	Sandbox SandboxMode `json:"sandbox,omitempty"`
	// Limits are the resource limits; a zero field: the backend's own.
	Limits Limits `json:"limits,omitzero"`
	// Size is the terminal's size at the start; zero: the backend's own.
	Size Size `json:"size,omitzero"`
}

// SandboxMode is how far a session is confined, as the original names the
// modes.
type SandboxMode string

const (
	SandboxFullAccess     SandboxMode = "danger-full-access"
	SandboxWorkspaceWrite SandboxMode = "workspace-write"
	SandboxReadOnly       SandboxMode = "read-only"
)

// SandboxModes lists the valid modes, loosest first.
var SandboxModes = []SandboxMode{SandboxFullAccess, SandboxWorkspaceWrite, SandboxReadOnly}

// Valid reports whether m is one of SandboxModes.
func (m SandboxMode) Valid() bool { return slices.Contains(SandboxModes, m) }

// Or is m, or def when m is empty.
func (m SandboxMode) Or(def SandboxMode) SandboxMode {
	if m == "" {
		return def
	}
	return m
}

// ParseSandboxMode returns the mode s names, or an error wrapping
// ErrInvalidSandboxMode that lists the valid ones. Empty is valid: the
// backend's own.
func ParseSandboxMode(s string) (SandboxMode, error) {
	m := SandboxMode(s)
	if m != "" && !m.Valid() {
		names := make([]string, len(SandboxModes))
		for i, v := range SandboxModes {
			names[i] = string(v)
		}
		return "", &kindError{ErrInvalidSandboxMode, fmt.Sprintf("sandbox mode must be one of %s; got %q", strings.Join(names, ", "), s)}
	}
	return m, nil
}

// Limits bound what a session's processes may use together. A zero field
// sets no bound.
type Limits struct {
	// Memory is the memory the processes may use, in bytes.
	Memory int64 `json:"memory,omitempty"`
	// Pids is how many processes and threads may exist at once.
	Pids int `json:"pids,omitempty"`
	// CPU is the CPU time the processes may use, in cores (1.5: one and a
	// half cores' worth).
	CPU float64 `json:"cpu,omitempty"`
}

// IsZero reports whether l sets no bound.
func (l Limits) IsZero() bool { return l == Limits{} }

// MinLimits are the lowest limits a shell can start under: a field of a
// policy's limits that is set must be at least this.
var MinLimits = Limits{Memory: 16 << 20, Pids: 8, CPU: 0.01}

// CheckMinimum refuses, with an error wrapping ErrLimitsUnsupported, a
// field below MinLimits (or negative).
func (l Limits) CheckMinimum() error {
	switch {
	case l.Memory < 0 || l.Memory > 0 && l.Memory < MinLimits.Memory:
		return &kindError{ErrLimitsUnsupported, fmt.Sprintf("a memory limit must be at least %d MiB; got %d bytes", MinLimits.Memory>>20, l.Memory)}
	case l.Pids < 0 || l.Pids > 0 && l.Pids < MinLimits.Pids:
		return &kindError{ErrLimitsUnsupported, fmt.Sprintf("a pids limit must be at least %d; got %d", MinLimits.Pids, l.Pids)}
	case l.CPU < 0 || l.CPU > 0 && l.CPU < MinLimits.CPU:
		return &kindError{ErrLimitsUnsupported, fmt.Sprintf("a cpu limit must be at least %g cores; got %g", MinLimits.CPU, l.CPU)}
	}
	return nil
}

// covers reports whether the enforced limits e are at least as tight as l
// asks, field by field.
func (l Limits) coveredBy(e Limits) []string {
	var missing []string
	tight := func(want, have int64) bool { return want == 0 || (have > 0 && have <= want) }
	if !tight(l.Memory, e.Memory) {
		missing = append(missing, fmt.Sprintf("memory %d bytes", l.Memory))
	}
	if !tight(int64(l.Pids), int64(e.Pids)) {
		missing = append(missing, fmt.Sprintf("pids %d", l.Pids))
	}
	if l.CPU > 0 && (e.CPU <= 0 || e.CPU > l.CPU) {
		missing = append(missing, fmt.Sprintf("cpu %g", l.CPU))
	}
	return missing
}

// Size is a terminal's size in character cells.
type Size struct {
	Rows int `json:"rows"`
	Cols int `json:"cols"`
}

// DefaultSize is the size of a terminal whose spawn does not set one, on
// every backend that does not configure its own: wide enough that
// commands rarely wrap, tall enough for a screen of a full-screen program.
var DefaultSize = Size{Rows: 40, Cols: 160}

// MaxSize bounds each side of a terminal.
const MaxSize = 1000

// IsZero reports whether s sets no size.
func (s Size) IsZero() bool { return s == Size{} }

// Or is s, or def when s is zero.
func (s Size) Or(def Size) Size {
	if s.IsZero() {
		return def
	}
	return s
}

// Validate checks that both sides are positive and within MaxSize.
func (s Size) Validate() error {
	if s.Rows <= 0 || s.Cols <= 0 || s.Rows > MaxSize || s.Cols > MaxSize {
		return fmt.Errorf("terminal size %dx%d: rows and cols must be between 1 and %d", s.Rows, s.Cols, MaxSize)
	}
	return nil
}

// Check is the one "refuse what you cannot enforce" check: it reports what
// of p a session with capabilities c does not enforce, as an error wrapping
// ErrSandboxUnsupported or ErrLimitsUnsupported, or nil. An empty sandbox
// mode asks for nothing; so does a zero limit. A limit below MinLimits is
// refused whatever c says: no shell starts under it.
func (p Policy) Check(c Capabilities) error {
	if err := p.Limits.CheckMinimum(); err != nil {
		return err
	}
	if p.Sandbox != "" && p.Sandbox != c.Sandbox.Or(SandboxFullAccess) {
		return fmt.Errorf("%w: sandbox mode %q (the session would run in %q)", ErrSandboxUnsupported, p.Sandbox, c.Sandbox.Or(SandboxFullAccess))
	}
	if missing := p.Limits.coveredBy(c.Limits); len(missing) > 0 {
		return fmt.Errorf("%w: %s", ErrLimitsUnsupported, strings.Join(missing, ", "))
	}
	return nil
}
