//go:build linux

package terminal_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

type runArgs struct {
	Command string `json:"command"`
}

// A plugin that injects the terminals service gets shells for its owners.
// This one's tool runs each command in a fresh shell on the "shell"
// backend (terminal-bash) and returns its output and exit status.
func ExampleService_Exec() {
	// terminal and terminal-bash registered themselves in the default
	// registry; a registry of our own adds the runner to them.
	reg := host.NewRegistry()
	for _, p := range host.DefaultRegistry().Plugins() {
		reg.Register(p)
	}
	reg.Register(host.Plugin{
		Name:   "example-runner",
		Inject: []host.Key{host.ToolsKey, terminal.ServiceKey},
		Apply: func(pctx *host.Context, _ any) (any, error) {
			terms, err := host.Service[*terminal.Service](pctx, terminal.ServiceKey)
			if err != nil {
				return nil, err
			}
			tool, err := host.NewTool("run", "Run a command in a fresh shell.", func(ctx context.Context, o *host.Owner, a runArgs) (string, error) {
				info, err := terms.Spawn(ctx, o, terminal.SpawnRequest{Type: "shell"})
				if err != nil {
					return "", err
				}
				defer terms.Kill(context.WithoutCancel(ctx), o, info.ID, "command done")
				send, err := terms.Exec(ctx, o, info.ID, termapi.ExecRequest{Command: a.Command, Stream: true})
				if err != nil {
					return "", err
				}
				var out strings.Builder
				for {
					text, err := send.Output(ctx)
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						return "", err
					}
					out.WriteString(text)
				}
				res, err := send.Wait(ctx)
				if err != nil {
					return "", err
				}
				if res.Exec == nil || res.Exec.State != termapi.ExecCompleted {
					return "", fmt.Errorf("the command did not complete (%s)", res.Reason)
				}
				return fmt.Sprintf("%s[status %d]", out.String(), res.Exec.ExitCode), nil
			})
			if err != nil {
				return nil, err
			}
			return nil, host.AddTool(pctx, tool)
		},
	})

	d, err := host.ParseDeployment("example.yaml", []byte(`
- id: terminal
  name: terminal
- id: shell
  name: terminal-bash
- id: runner
  name: example-runner
`), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	h, err := host.Load(ctx, d, host.WithRegistry(reg))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close(ctx)
	owner, err := h.NewOwner("agent-1", "/")
	if err != nil {
		fmt.Println(err)
		return
	}
	args, _ := json.Marshal(runArgs{Command: "echo hello from $PWD; false"})
	fmt.Println(h.Tools().Call(ctx, owner, "run", args).Text)
	// Output:
	// hello from /
	// [status 1]
}
