package terminal

import (
	"context"
	"regexp"
	"strings"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// What the tools on this service share about interactive programs: how a
// prompt for a secret is recognised, and how a tool hands a waiting
// command to the interactive terminal tools.

// AsksForSecret reports whether a send that settled with res, on a
// terminal whose last line is prompt, shows a program asking for a secret:
// it is proven to wait for input (stdin_read, not the shell's prompt), and
// the terminal does not echo what it reads while reading a line
// (InputSecret), or, where the backend cannot tell (InputUnknown: it does
// not see the settings, or they are its own), the prompt asks for a
// password, passphrase, PIN or the like. A terminal that echoes, or reads
// a key at a time (an editor, a line editor), is never taken for one.
func AsksForSecret(res termapi.SendResult, prompt string) bool {
	if res.Reason != termapi.WaitStdinRead || res.Prompt {
		return false
	}
	switch res.Input {
	case termapi.InputSecret:
		return true
	case termapi.InputUnknown:
		return SecretPrompt(prompt)
	}
	return false
}

// secretPrompt matches the prompts of programs that read a secret:
// "Password:", "[sudo] password for ann:", "Enter passphrase for key
// '/home/ann/.ssh/id_ed25519':", "PIN:", "New password:".
var secretPrompt = regexp.MustCompile(`(?i)(pass(word|phrase|code)|\bpin\b|secret|token|credentials?)\b[^\n]*[:?]\s*$`)

// SecretPrompt reports whether a terminal's last line asks for a secret.
func SecretPrompt(line string) bool {
	line = strings.TrimRight(line, " \t")
	return line != "" && secretPrompt.MatchString(line)
}

// Handoff is a command that a tool started in one of its owner's sessions
// and that is proven to wait for input, handed to the interactive terminal
// tools instead of being interrupted (the bash tool's onInput: handoff).
// The session stays the handing tool's: the terminal tools type into it,
// read it and signal it until the command ends, then let it go.
type Handoff struct {
	// SessionID is the session the command runs in; its shell is at the
	// command, not at its prompt.
	SessionID string
	// Command is the command as the model wrote it.
	Command string
	// RawEnd is the raw output position of the send that proved the wait
	// (SendResult.RawEnd): what the handing tool showed ends there.
	RawEnd int64
}

// Adopter takes handed-over commands (the instance of the interactive
// terminal tools implements it; a tool finds it among the host's
// instances).
type Adopter interface {
	// Adopt makes h an interactive terminal of owner and returns it.
	Adopt(ctx context.Context, owner *host.Owner, h Handoff) (Adopted, error)
}

// Adopted is a handed-over command in the terminal tools' hands.
type Adopted interface {
	// ID is the terminal's id, which the model passes to the tools.
	ID() string
	// Done is closed once the command has ended and its shell is back at
	// its prompt (or the session is gone): the session is the handing
	// tool's again.
	Done() <-chan struct{}
	// Release reports whether Done is closed, after finding out, within
	// moments, whether a command nobody has read since it ended has ended.
	Release(ctx context.Context) bool
}
