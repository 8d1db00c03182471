// Command dsh-backend-kubernetes serves the "kubernetes" backend as a plugin
// executable: each owner's shells are execs into a pod of its own that the
// backend creates and deletes, or into an existing pod, through the
// Kubernetes API (see plugins/terminal-kubernetes). It is a separate
// executable so that dsh itself does not link client-go. A deployment loads
// it with an entry whose name is its path; deployments/kubernetes.yaml is
// an example.
package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"

	terminalkubernetes "github.com/dshdev/dsh/plugins/terminal-kubernetes"
	"github.com/dshdev/dsh/plugins/terminal/backendplugin"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

func main() {
	backendplugin.Serve(newBackend)
}

func newBackend(ctx context.Context, raw json.RawMessage) (termapi.Backend, error) {
	cfg, err := terminalkubernetes.DecodeConfig(raw)
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return terminalkubernetes.New(ctx, cfg, log)
}
