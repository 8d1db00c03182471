package bashtool

import (
	"strings"

	"github.com/dshdev/dsh/config"
)

// DefaultDescription is the tool description the model sees unless a
// deployment overrides it.
const DefaultDescription = "Run commands in a persistent bash shell. State, including the current directory and exported environment variables, persists across calls for this agent."

// DefaultInstructions are what clients are told about the tool as a whole,
// unless a deployment says otherwise (MCP clients show a server's
// instructions to the model; Claude Code and Codex also use them to find
// tools hidden behind a tool search).
const DefaultInstructions = "dsh gives you a persistent bash shell through the bash tool. The shell lives across calls: the current directory, exported variables, functions, activated environments and background jobs stay as you left them. Long output keeps its beginning and its end, and the whole output is saved to a file named in the result. A program that waits for input is interrupted at once: pass input with arguments, a pipe, a here-document or a --yes style flag. A call that runs past its timeout returns what it printed, and the shell is reset."

// timeoutSentences end the default instructions, for each TimeoutAction.
var timeoutSentences = map[string]string{
	TimeoutReset:      "A call that runs past its timeout returns what it printed, and the shell is reset.",
	TimeoutInterrupt:  "A call that runs past its timeout returns what it printed; the command is interrupted and the shell is kept.",
	TimeoutBackground: "A call that runs past its timeout returns what it printed; the command goes on as a background job of the same shell, which you can wait for or kill.",
}

// DefaultInstructionsFor are the default instructions told for a timeout
// action (one of the Timeout* constants).
func DefaultInstructionsFor(timeoutAction string) string {
	return strings.TrimSuffix(DefaultInstructions, timeoutSentences[TimeoutReset]) + timeoutSentences[timeoutAction]
}

// instructions are the server instructions the tool sends: the configured
// ones, or when those are the default, the default told for the configured
// timeout action.
func (c *Config) instructions() string {
	if c.Instructions != DefaultInstructions {
		return c.Instructions
	}
	return DefaultInstructionsFor(c.TimeoutAction)
}

// Config configures the bash tool.
type Config struct {
	// BackendType is the terminals backend each owner's shell runs on.
	BackendType string `json:"backendType"`
	// TimeoutMs bounds a call's command in milliseconds. Starting the
	// owner's shell comes before it, under a bound of its own (two
	// minutes), since under a storm of first calls the wait is the
	// machine's. A command that runs longer returns its partial output;
	// TimeoutAction says what becomes of it and the shell.
	TimeoutMs int `json:"timeoutMs"`
	// TimeoutAction is what a call does with a command that runs past
	// TimeoutMs: "reset" closes the shell (the original's contract);
	// "interrupt" signals the command (SIGINT, then SIGTERM, then SIGKILL),
	// kills what else it started (background jobs, what they forked) and
	// keeps the shell and earlier jobs; "background" stops the command and
	// resumes it as a background job of the same shell (a command that
	// ignores SIGTSTP is interrupted instead). The shell is reset when it
	// does not come back.
	TimeoutAction string `json:"timeoutAction" jsonschema:"enum=reset,enum=interrupt,enum=background"`
	// CancelAction is what a cancelled call (the client cancelled it: Esc
	// in Claude Code, notifications/cancelled, a second Ctrl-C in the REPL)
	// does with its command: "interrupt" signals it (SIGINT, then SIGTERM,
	// then SIGKILL) and keeps the shell; "reset" closes the shell (the
	// original's contract). Either way the owner's next result starts with
	// a line saying so, and the output the command printed before.
	CancelAction string `json:"cancelAction" jsonschema:"enum=interrupt,enum=reset"`
	// MaxOutputChars bounds the output shown to the model, in characters
	// (Unicode code points). Longer output keeps its beginning and its end;
	// the whole output (up to MaxSavedBytes) is saved to a file named in the
	// result.
	MaxOutputChars int `json:"maxOutputChars"`
	// Description is the tool description the model sees.
	Description string `json:"description"`
	// Instructions are shown to the model as the server's instructions
	// (MCP initialize); empty sends none for this tool.
	Instructions string `json:"instructions"`
	// OnInput is what a call does with a command proven to wait for input
	// that is not asking for a secret: "interrupt" signals it (SIGINT, then
	// SIGTERM, then SIGKILL) and keeps the shell; "handoff" hands the
	// running program over as an interactive terminal (the tool-terminal
	// plugin must be loaded), and the model goes on with terminal_send and
	// terminal_read. The shell's state is kept either way.
	OnInput string `json:"onInput" jsonschema:"enum=interrupt,enum=handoff"`
	// OutputDir is where each owner's directory of full outputs is created;
	// empty means dsh's private directory ($XDG_RUNTIME_DIR/dsh, else
	// ~/.cache/dsh). Owners' directories are removed when the owner
	// closes. A directory other users can write lets them replace saved
	// output once a command deletes the owner's directory.
	OutputDir string `json:"outputDir,omitempty"`
	// MaxSavedBytes bounds each saved output file: past it the file keeps
	// its first and its last half, around a line saying how much was cut
	// there, and the result's notice says the file was cut.
	MaxSavedBytes int64 `json:"maxSavedBytes"`
	// MaxSavedBytesPerOwner bounds an owner's saved output files together:
	// its oldest files are removed to make room for a new one.
	MaxSavedBytesPerOwner int64 `json:"maxSavedBytesPerOwner"`
	// MaxSavedBytesTotal bounds the saved output files of every owner of
	// this tool together: a file that would pass it (once its owner's older
	// files are gone) stops there, and says so.
	MaxSavedBytesTotal int64 `json:"maxSavedBytesTotal"`
}

// DefaultConfig returns the configuration used when a deployment sets none.
func DefaultConfig() *Config {
	return &Config{
		BackendType:    "shell",
		TimeoutMs:      300000,
		TimeoutAction:  TimeoutReset,
		OnInput:        OnInputInterrupt,
		CancelAction:   CancelInterrupt,
		MaxOutputChars: 16000,
		Description:    DefaultDescription,
		Instructions:   DefaultInstructions,

		MaxSavedBytes:         32 << 20,
		MaxSavedBytesPerOwner: 128 << 20,
		MaxSavedBytesTotal:    512 << 20,
	}
}

// minSavedBytes keeps a saved output's head and tail useful.
const minSavedBytes = 2 << 10

// The values of OnInput.
const (
	OnInputInterrupt = "interrupt"
	OnInputHandoff   = "handoff"
)

// maxTimeoutMs keeps a timeout representable as a time.Duration and sane.
const maxTimeoutMs = 1 << 31

// Validate reports the first invalid field, in the original's wording.
func (c *Config) Validate() error {
	switch {
	case strings.TrimSpace(c.BackendType) == "":
		return config.FieldErrorf("backendType", "tool-bash-persistent: backendType must be non-empty")
	case c.TimeoutMs <= 0 || c.TimeoutMs > maxTimeoutMs:
		return config.FieldErrorf("timeoutMs", "tool-bash-persistent: timeoutMs must be a positive safe integer")
	case c.TimeoutAction != TimeoutReset && c.TimeoutAction != TimeoutInterrupt && c.TimeoutAction != TimeoutBackground:
		return config.FieldErrorf("timeoutAction", "tool-bash-persistent: timeoutAction must be one of reset, interrupt, background; got %q", c.TimeoutAction)
	case c.OnInput != OnInputInterrupt && c.OnInput != OnInputHandoff:
		return config.FieldErrorf("onInput", "tool-bash-persistent: onInput must be one of interrupt, handoff; got %q", c.OnInput)
	case c.CancelAction != CancelInterrupt && c.CancelAction != CancelReset:
		return config.FieldErrorf("cancelAction", "tool-bash-persistent: cancelAction must be one of interrupt, reset; got %q", c.CancelAction)
	case c.MaxOutputChars <= 0:
		return config.FieldErrorf("maxOutputChars", "tool-bash-persistent: maxOutputChars must be a positive safe integer")
	case c.MaxSavedBytes < minSavedBytes:
		return config.FieldErrorf("maxSavedBytes", "tool-bash-persistent: maxSavedBytes must be at least %d", minSavedBytes)
	case c.MaxSavedBytesPerOwner < c.MaxSavedBytes:
		return config.FieldErrorf("maxSavedBytesPerOwner", "tool-bash-persistent: maxSavedBytesPerOwner must be at least maxSavedBytes (%d)", c.MaxSavedBytes)
	case c.MaxSavedBytesTotal < c.MaxSavedBytesPerOwner:
		return config.FieldErrorf("maxSavedBytesTotal", "tool-bash-persistent: maxSavedBytesTotal must be at least maxSavedBytesPerOwner (%d)", c.MaxSavedBytesPerOwner)
	case strings.TrimSpace(c.Description) == "":
		return config.FieldErrorf("description", "tool-bash-persistent: description must be non-empty")
	}
	return nil
}
