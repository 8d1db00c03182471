// Command dsh-backend-bash serves the "shell" backend (bash on a PTY, the
// one dsh links in) out of process, as a plugin executable: the reference
// for backend authors, and what proves that a backend behind the plugin
// protocol behaves as one in process. A deployment loads it with an entry
// whose name is its path; the entry's config is terminal-bash's.
package main

import (
	"context"
	"encoding/json"
	"log/slog"

	terminalbash "github.com/dshdev/dsh/plugins/terminal-bash"
	"github.com/dshdev/dsh/plugins/terminal/backendplugin"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

func main() {
	backendplugin.Serve(newBackend)
}

// newBackend decodes the config strictly over the defaults, as the host
// does for the in-process plugin, and builds the backend.
func newBackend(_ context.Context, raw json.RawMessage) (termapi.Backend, error) {
	cfg, err := terminalbash.ConfigFromJSON(raw)
	if err != nil {
		return nil, err
	}
	return terminalbash.NewBackend(cfg, backendplugin.Logger(slog.LevelInfo))
}
