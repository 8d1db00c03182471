// Command dsh-backend-docker serves the "docker" backend as a plugin
// executable: each session is a bash in a container of its own, or in an
// existing container, through the Docker Engine API (see
// plugins/terminal-docker). It is a separate executable so that dsh itself
// does not link a container client. A deployment loads it with an entry
// whose name is its path; deployments/docker.yaml is an example.
package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"

	terminaldocker "github.com/dshdev/dsh/plugins/terminal-docker"
	"github.com/dshdev/dsh/plugins/terminal/backendplugin"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

func main() {
	backendplugin.Serve(newBackend)
}

func newBackend(ctx context.Context, raw json.RawMessage) (termapi.Backend, error) {
	cfg, err := terminaldocker.DecodeConfig(raw)
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if keeper, ok := backendplugin.KeeperOf(ctx); ok {
		// Its containers outlive dsh: labelled for the next keeper of
		// this entry, which removes them if this one dies.
		return terminaldocker.NewKept(ctx, cfg, log, keeper)
	}
	return terminaldocker.New(ctx, cfg, log)
}
