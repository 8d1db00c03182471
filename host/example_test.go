package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dshdev/dsh/config"
	"github.com/dshdev/dsh/host"
)

// shoutConfig is the config of the example plugin: decoded strictly over
// the defaults that Plugin.Config returns, then validated.
type shoutConfig struct {
	// Suffix ends every answer.
	Suffix string `json:"suffix"`
}

func (c *shoutConfig) Validate() error {
	if c.Suffix == "" {
		return config.FieldErrorf("suffix", "shout: suffix must be non-empty")
	}
	return nil
}

// shoutArgs are the tool's arguments; their JSON Schema, the one clients
// see, is reflected from the struct and its doc comments.
type shoutArgs struct {
	Text string `json:"text"`
}

// A plugin registers itself, usually in its package's init. This one adds
// a tool, and removes it again when it unloads.
func ExampleRegister() {
	reg := host.NewRegistry()
	reg.Register(host.Plugin{
		Name:    "shout",
		Summary: "the shout tool: upper-cases its text",
		Inject:  []host.Key{host.ToolsKey},
		Config:  func() any { return &shoutConfig{Suffix: "!"} },
		Apply: host.Typed(func(pctx *host.Context, cfg *shoutConfig) (any, error) {
			tool, err := host.NewTool("shout", "Upper-case a text.", func(_ context.Context, _ *host.Owner, a shoutArgs) (string, error) {
				return strings.ToUpper(a.Text) + cfg.Suffix, nil
			})
			if err != nil {
				return nil, err
			}
			// Registered while the plugin is loaded: unloading removes it.
			return nil, host.AddTool(pctx, tool)
		}),
	})

	// A deployment names the plugin and configures it.
	d, err := host.ParseDeployment("example.yaml", []byte("- id: shout\n  name: shout\n  config: {suffix: '!!'}\n"), nil)
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

	// An owner is one agent; a call runs one tool for it.
	owner, err := h.NewOwner("agent-1", ".")
	if err != nil {
		fmt.Println(err)
		return
	}
	args, _ := json.Marshal(shoutArgs{Text: "hello"})
	fmt.Println(h.Tools().Call(ctx, owner, "shout", args).Text)
	bad := h.Tools().Call(ctx, owner, "shout", json.RawMessage(`{"text": 3}`))
	fmt.Println(bad.IsError, bad.Text)
	// Output:
	// HELLO!!
	// true invalid arguments: "text" must be a string, got number 3
}
