// Command dsh-backend-ssh serves the "ssh" backend as a plugin executable:
// each session is an interactive bash on another machine, over one SSH
// connection with a PTY (see plugins/terminal-ssh). A deployment loads it
// with an entry whose name is its path; deployments/ssh.yaml is an example.
package main

import (
	"context"
	"encoding/json"

	terminalssh "github.com/dshdev/dsh/plugins/terminal-ssh"
	"github.com/dshdev/dsh/plugins/terminal/backendplugin"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

func main() {
	backendplugin.Serve(newBackend)
}

func newBackend(_ context.Context, raw json.RawMessage) (termapi.Backend, error) {
	cfg, err := terminalssh.DecodeConfig(raw)
	if err != nil {
		return nil, err
	}
	return terminalssh.New(cfg)
}
