// Package audit writes dsh's audit log: one JSON object per tool call, on
// a line of its own (JSON lines), appended to a file only its user can
// read. It records what an agent ran, for whom and how it ended, never the
// output itself (its size only).
//
// Commands can hold secrets (a password on a command line, a token in a
// curl header). Redact patterns, regular expressions, are applied to the
// command (or a tool's arguments) before it is written: each match is
// replaced by [REDACTED]. A pattern that matches everything ('.*', or
// '(?s).+') keeps commands out of the log entirely.
package audit

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sync"
	"time"
)

// Record is one tool call.
type Record struct {
	// Time is when the call started.
	Time time.Time `json:"time"`
	// Session is the MCP session's owner id ("mcp-…"): the shell's owner,
	// which dsh sessions lists.
	Session string `json:"session"`
	// Owner is who made the call: the token's identity over HTTP
	// ("token-…", a digest prefix, never the token), "stdio", or
	// "http" for a server without tokens.
	Owner string `json:"owner"`
	// Client is the MCP client's name and version, as it said.
	Client string `json:"client,omitempty"`
	Tool   string `json:"tool"`
	// Command is the bash tool's command; Arguments the arguments of any
	// other tool, as JSON text. Both are redacted.
	Command   string `json:"command,omitempty"`
	Arguments string `json:"arguments,omitempty"`
	// Outcome is "ok", "error" (an error result the model sees) or
	// "cancelled" (the client cancelled, or went away).
	Outcome string `json:"outcome"`
	// ExitCode is the command's exit status, when it ran to its end.
	ExitCode *int `json:"exitCode,omitempty"`
	// Ended says how a command ended that did not run to its end: "timed
	// out (interrupt)", "waited for input, interrupted", "shell exited".
	Ended string `json:"ended,omitempty"`
	// DurationMs is how long the call took, in milliseconds.
	DurationMs float64 `json:"durationMs"`
	// OutputBytes is the size of the result the model got.
	OutputBytes int `json:"outputBytes"`
}

// Log appends Records to a file. Safe for concurrent use.
type Log struct {
	mu     sync.Mutex
	f      *os.File
	redact []*regexp.Regexp
}

// Open opens (creating it 0600) the log at path for appending. redact are
// the patterns applied to commands and arguments.
func Open(path string, redact []string) (*Log, error) {
	l := &Log{}
	for _, p := range redact {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("audit: redact pattern %q: %w", p, err)
		}
		l.redact = append(l.redact, re)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().Perm()&0o077 != 0 {
		f.Close()
		return nil, fmt.Errorf("audit: %s is open to other users (mode %#o); make it 0600", path, fi.Mode().Perm())
	}
	l.f = f
	return l, nil
}

// Redact applies the log's patterns to s.
func (l *Log) Redact(s string) string {
	for _, re := range l.redact {
		s = re.ReplaceAllLiteralString(s, "[REDACTED]")
	}
	return s
}

// Write appends r, its command and arguments redacted, as one line. A
// single write(2) of the whole line to a file opened O_APPEND: lines of
// concurrent calls, or of several dsh processes sharing the file, never
// interleave.
func (l *Log) Write(r Record) error {
	r.Command = l.Redact(r.Command)
	r.Arguments = l.Redact(r.Arguments)
	r.Time = r.Time.UTC()
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.Write(line); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}

// Close closes the file.
func (l *Log) Close() error { return l.f.Close() }
