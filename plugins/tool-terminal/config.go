package terminaltool

import (
	"strings"

	"github.com/dshdev/dsh/config"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// Config configures the interactive terminal tools.
type Config struct {
	// BackendType is the terminals backend each terminal runs on.
	BackendType string `json:"backendType"`
	// Rows and Cols are a terminal's size when terminal_open sets none.
	Rows int `json:"rows"`
	Cols int `json:"cols"`
	// Term is the TERM a terminal's program sees: what full-screen programs
	// draw for.
	Term string `json:"term"`
	// MaxPerOwner bounds the terminals one agent has open at once.
	MaxPerOwner int `json:"maxPerOwner"`
	// MaxTotal bounds the terminals open at once, all agents together.
	MaxTotal int `json:"maxTotal"`
	// ReadTimeoutMs is how long terminal_read waits when the call sets no
	// timeoutMs; MaxReadTimeoutMs bounds what a call may set.
	ReadTimeoutMs    int `json:"readTimeoutMs"`
	MaxReadTimeoutMs int `json:"maxReadTimeoutMs"`
	// MaxOutputChars bounds the output of one read, in characters: longer
	// output keeps its newest part.
	MaxOutputChars int `json:"maxOutputChars"`
}

// DefaultConfig returns the configuration used when a deployment sets none.
func DefaultConfig() *Config {
	return &Config{
		BackendType:      "shell",
		Rows:             24,
		Cols:             80,
		Term:             "xterm-256color",
		MaxPerOwner:      8,
		MaxTotal:         256,
		ReadTimeoutMs:    15000,
		MaxReadTimeoutMs: 600000,
		MaxOutputChars:   8000,
	}
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	size := termapi.Size{Rows: c.Rows, Cols: c.Cols}
	switch {
	case strings.TrimSpace(c.BackendType) == "":
		return config.FieldErrorf("backendType", "tool-terminal: backendType must be non-empty")
	case size.Validate() != nil:
		return config.FieldErrorf("rows", "tool-terminal: %v", size.Validate())
	case c.Term == "" || strings.ContainsAny(c.Term, "'\"\\ \t\n$`"):
		return config.FieldErrorf("term", "tool-terminal: term must be a terminal type name such as xterm-256color; got %q", c.Term)
	case c.MaxPerOwner <= 0:
		return config.FieldErrorf("maxPerOwner", "tool-terminal: maxPerOwner must be positive")
	case c.MaxTotal <= 0:
		return config.FieldErrorf("maxTotal", "tool-terminal: maxTotal must be positive")
	case c.ReadTimeoutMs <= 0:
		return config.FieldErrorf("readTimeoutMs", "tool-terminal: readTimeoutMs must be positive")
	case c.MaxReadTimeoutMs < c.ReadTimeoutMs || c.MaxReadTimeoutMs > 1<<31:
		return config.FieldErrorf("maxReadTimeoutMs", "tool-terminal: maxReadTimeoutMs must be at least readTimeoutMs and at most 2147483648")
	case c.MaxOutputChars < 200:
		return config.FieldErrorf("maxOutputChars", "tool-terminal: maxOutputChars must be at least 200")
	}
	return nil
}
