// Command backend-audit is an example of a backend plugin, and a useful
// one: the shell backend, with every command the agent runs appended to an
// audit log (one JSON object per line: time, owner, session, command, and
// when it has ended, its exit status). It registers as type
// "audited-shell"; point the bash tool's backendType at it.
//
//   - id: audited
//     name: ./bin/backend-audit          # this program, built
//     config: {log: /var/log/dsh-audit.jsonl}
//   - id: bash
//     name: tool-bash-persistent
//     config: {backendType: audited-shell}
//
// A backend is a termapi.Backend; this one wraps another. See the
// backendplugin package for the whole contract.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	terminalbash "github.com/dshdev/dsh/plugins/terminal-bash"
	"github.com/dshdev/dsh/plugins/terminal/backendplugin"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// Config is the deployment entry's config.
type Config struct {
	// Log is the file commands are appended to. Required.
	Log string `json:"log"`
	// Shell is the config of the wrapped shell backend (terminal-bash's).
	Shell json.RawMessage `json:"shell,omitempty"`
}

func main() {
	backendplugin.Serve(newBackend)
}

func newBackend(_ context.Context, raw json.RawMessage) (termapi.Backend, error) {
	var cfg Config
	if err := decodeStrict(raw, &cfg); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if cfg.Log == "" {
		return nil, errors.New("config: log (the audit file) is required")
	}
	shell, err := terminalbash.ConfigFromJSON(cfg.Shell)
	if err != nil {
		return nil, fmt.Errorf("config: shell: %w", err)
	}
	inner, err := terminalbash.NewBackend(shell, backendplugin.Logger(slog.LevelInfo))
	if err != nil {
		return nil, err
	}
	log, err := openLog(cfg.Log)
	if err != nil {
		inner.Close(context.Background())
		return nil, err
	}
	return &auditBackend{Backend: inner, log: log}, nil
}

// decodeStrict decodes JSON, refusing unknown keys: they are typos.
func decodeStrict(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
