//go:build linux

package terminalbash

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/dshdev/dsh/config"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// Config configures the shell backend. Every duration is in milliseconds.
type Config struct {
	// BackendType is the name sessions are spawned under in the terminals
	// service (the spawn request's type).
	BackendType string `json:"backendType"`
	// ShellPath is the shell executable. Empty selects /bin/bash.
	ShellPath string `json:"shellPath"`
	// ShellArgs are the shell's arguments. Empty selects
	// ["--noediting", "--noprofile", "--norc", "-i"]: an interactive bash
	// that reads no startup files and has no line editor. The shell
	// protocol types whole lines, which the terminal hands to bash at once;
	// a shell started with a line editor has it turned off when it first
	// reaches its prompt, at the cost of one more typed line.
	ShellArgs []string `json:"shellArgs"`
	// Rows is the terminal height in lines.
	Rows int `json:"rows"`
	// Cols is the terminal width in columns.
	Cols int `json:"cols"`
	// ScrollbackLines is how many lines of history a session keeps for
	// paging.
	ScrollbackLines int `json:"scrollbackLines"`
	// ScrollbackMaxBytes bounds the history a session keeps, in UTF-8 bytes.
	ScrollbackMaxBytes int `json:"scrollbackMaxBytes"`
	// MaxReadBytes caps one scrollback page, one settled viewport, and the
	// output a send holds for its caller (the newest bytes are kept unless
	// the caller streams the output).
	MaxReadBytes int `json:"maxReadBytes"`
	// IdleSilenceMs is how long a send waits without output and without
	// proof that the terminal waits for input before it settles as
	// inferred_idle.
	IdleSilenceMs int `json:"idleSilenceMs"`
	// TimeoutMs bounds one send (and the start of a session) when the send
	// does not set its own timeout.
	TimeoutMs int `json:"timeoutMs"`
	// DisposeGraceMs is how long closing a session waits after each
	// escalation step (TERM, then KILL) for its processes to go.
	DisposeGraceMs int `json:"disposeGraceMs"`
	// StdinProbeMaxMs caps the interval between checks that the foreground
	// program is blocked reading the terminal. Checks start a few
	// milliseconds after the last write or output and back off to this cap
	// while the terminal stays quiet.
	StdinProbeMaxMs int `json:"stdinProbeMaxMs"`
	// CommandTerminals gives each command a terminal of its own for its
	// stdout and stderr (stdin, job control and the controlling terminal
	// stay the session's): what a background job prints then goes to the
	// terminal of the command that started it, and is never taken for a
	// later command's output. False: commands share the session's
	// terminal, where a chatty job's output mixes with theirs.
	CommandTerminals bool `json:"commandTerminals"`
	// Env says which of dsh's environment variables a shell gets (see
	// EnvPolicy). The default passes everything but names that look like
	// credentials, SSH_AUTH_SOCK, and passwords in URLs.
	Env EnvPolicy `json:"env"`
	// Sandbox confines the shells (see SandboxConfig). The default is no
	// sandbox: mode danger-full-access, network on.
	Sandbox SandboxConfig `json:"sandbox"`
	// Limits bound each shell and everything it starts, together (see
	// LimitsConfig). A spawn's policy may set its own; the default is none.
	Limits LimitsConfig `json:"limits"`
	// WarmShells is how many shells the backend keeps started and waiting
	// at their prompt, so that a new session takes one instead of starting
	// bash, which its first call then does not wait for. A session whose
	// policy asks for other limits, sandbox mode or terminal size starts
	// its own shell, as do all sessions while the pool is empty; the pool
	// refills in the background, a shell at a time per two CPUs. Each
	// waiting shell costs its memory (see the README's Performance
	// section). 0 (the default) keeps none. Shells
	// are not pooled in a sandbox (its view of files is made for one
	// owner's workspace), where cgroup v2 enforces the limits, nor where
	// the shells are kept for a later dsh (a keeper) or served by
	// dsh-backend-bash.
	WarmShells int `json:"warmShells"`
}

// LimitsConfig bounds what one shell and everything it starts may use
// together, in the shell's own cgroups: cgroup v2 where dsh's cgroup is
// given the controllers, cgroup v1's pids, memory and cpu hierarchies
// otherwise. A limit the machine cannot enforce fails the load. Zero sets
// no limit.
type LimitsConfig struct {
	// Memory bounds the memory of the shell's processes together, swap
	// included ("512MiB", "2GiB", or bytes). Past it the kernel's OOM
	// killer ends one of them, normally the largest.
	Memory config.Bytes `json:"memory"`
	// Pids bounds how many processes and threads the shell's processes
	// may be at once; a fork past it fails (a fork bomb stops there).
	Pids int `json:"pids"`
	// CPU bounds the CPU time of the shell's processes, in cores (0.5:
	// half of one core, 2: two cores' worth).
	CPU float64 `json:"cpu"`
}

// Lower bounds of the limits: below them a shell cannot even start.
var (
	minMemory = config.Bytes(termapi.MinLimits.Memory)
	minPids   = termapi.MinLimits.Pids
	minCPU    = termapi.MinLimits.CPU
)

func (l LimitsConfig) validate(field string) error {
	switch {
	case l.Memory < 0 || (l.Memory > 0 && l.Memory < minMemory):
		return config.FieldErrorf(field+".memory", "terminal-bash: %s.memory must be 0 (no limit) or at least %s", field, minMemory)
	case l.Pids < 0 || (l.Pids > 0 && l.Pids < minPids):
		return config.FieldErrorf(field+".pids", "terminal-bash: %s.pids must be 0 (no limit) or at least %d", field, minPids)
	case l.CPU < 0 || (l.CPU > 0 && l.CPU < minCPU) || l.CPU > 1<<20:
		return config.FieldErrorf(field+".cpu", "terminal-bash: %s.cpu must be 0 (no limit) or between %g and %d cores", field, minCPU, 1<<20)
	}
	return nil
}

// Default shell and arguments, used when the config leaves them empty.
const (
	defaultShellPath = "/bin/bash"
	maxTermSize      = 1<<16 - 1
	// maxWarmShells bounds the pool: past it the idle shells cost more
	// memory than any first call is worth.
	maxWarmShells = 4096
)

func defaultShellArgs() []string { return []string{"--noediting", "--noprofile", "--norc", "-i"} }

// DefaultConfig returns the configuration a deployment starts from.
func DefaultConfig() *Config {
	return &Config{
		BackendType:        "shell",
		ShellPath:          defaultShellPath,
		ShellArgs:          defaultShellArgs(),
		Rows:               40,
		Cols:               160,
		ScrollbackLines:    10000,
		ScrollbackMaxBytes: 4 << 20,
		MaxReadBytes:       256 << 10,
		IdleSilenceMs:      3000,
		TimeoutMs:          30000,
		DisposeGraceMs:     3000,
		StdinProbeMaxMs:    250,
		CommandTerminals:   true,
		Env:                defaultEnvPolicy(),
		Sandbox:            defaultSandbox(),
	}
}

// maxMillis bounds every millisecond setting.
const maxMillis = 1<<31 - 1

// ConfigFromJSON decodes a config given as JSON (the config of a
// deployment entry, as a backend plugin receives it) over the defaults,
// strictly: an unknown key is an error. Then it validates the result.
func ConfigFromJSON(raw json.RawMessage) (*Config, error) {
	cfg := DefaultConfig()
	if len(bytes.TrimSpace(raw)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(cfg); err != nil {
			return nil, errorf("config: %w", err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	if c.BackendType == "" {
		return fieldErrorf("backendType", "backendType must be non-empty")
	}
	positive := []struct {
		field string
		value int
	}{
		{"rows", c.Rows},
		{"cols", c.Cols},
		{"scrollbackLines", c.ScrollbackLines},
		{"scrollbackMaxBytes", c.ScrollbackMaxBytes},
		{"maxReadBytes", c.MaxReadBytes},
		{"idleSilenceMs", c.IdleSilenceMs},
		{"timeoutMs", c.TimeoutMs},
		{"disposeGraceMs", c.DisposeGraceMs},
		{"stdinProbeMaxMs", c.StdinProbeMaxMs},
	}
	for _, p := range positive {
		if p.value <= 0 {
			return fieldErrorf(p.field, "%s must be a positive integer", p.field)
		}
	}
	// Durations are milliseconds; past 2^31 (24.8 days, the bound the
	// original's timers had) they are surely a mistake, and far past it they
	// overflow time.Duration.
	for _, p := range []struct {
		field string
		value int
	}{
		{"idleSilenceMs", c.IdleSilenceMs},
		{"timeoutMs", c.TimeoutMs},
		{"disposeGraceMs", c.DisposeGraceMs},
		{"stdinProbeMaxMs", c.StdinProbeMaxMs},
	} {
		if p.value > maxMillis {
			return fieldErrorf(p.field, "%s must not exceed %d", p.field, maxMillis)
		}
	}
	if c.WarmShells < 0 || c.WarmShells > maxWarmShells {
		return fieldErrorf("warmShells", "warmShells must be between 0 and %d", maxWarmShells)
	}
	if c.Rows > maxTermSize {
		return fieldErrorf("rows", "rows must not exceed %d", maxTermSize)
	}
	if c.Cols > maxTermSize {
		return fieldErrorf("cols", "cols must not exceed %d", maxTermSize)
	}
	if c.MaxReadBytes > c.ScrollbackMaxBytes {
		return fieldErrorf("maxReadBytes", "maxReadBytes must not exceed scrollbackMaxBytes")
	}
	if err := c.Env.validate("env"); err != nil {
		return err
	}
	if err := c.Limits.validate("limits"); err != nil {
		return err
	}
	return c.Sandbox.validate("sandbox")
}

// shell returns the effective executable and argv (without argv[0]).
func (c *Config) shell() (string, []string) {
	path, args := c.ShellPath, c.ShellArgs
	if path == "" {
		path = defaultShellPath
	}
	if len(args) == 0 {
		args = defaultShellArgs()
	}
	return path, args
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// errorf formats an error the backend returns: each names the backend
// once, at its start, as the host and the plugin protocol expect.
func errorf(format string, args ...any) error {
	return fmt.Errorf("terminal-bash: "+format, args...)
}

// fieldErrorf is errorf for a config field at fault (config.FieldError).
func fieldErrorf(field, format string, args ...any) *config.FieldError {
	return config.FieldErrorf(field, "terminal-bash: "+format, args...)
}
