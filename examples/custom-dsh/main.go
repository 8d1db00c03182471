// Command custom-dsh is dsh with one plugin of its own: the shout tool,
// beside the plugins that ship with dsh. It is the whole recipe for a dsh
// of your own: plugins register in init, and dshcmd.Main is the command
// line. Run `go run ./examples/custom-dsh call shout '{"text":"hi"}' -d
// examples/custom-dsh/deploy.yaml`.
//
// The shout tool's argument has a description, its field's doc comment, as
// dsh's own tools' do: go generate runs dsh-doc-comments (the line below),
// which writes doc_comments_gen.go.
package main

//go:generate go run github.com/dshdev/dsh/cmd/dsh-doc-comments

import (
	"context"
	"strings"

	dshcmd "github.com/dshdev/dsh/cmd"
	"github.com/dshdev/dsh/host"
	_ "github.com/dshdev/dsh/plugins/standard"
)

// shoutConfig is the plugin's config, decoded strictly over the defaults.
type shoutConfig struct {
	// Suffix ends every answer.
	Suffix string `json:"suffix"`
}

// shoutArgs are the tool's arguments.
type shoutArgs struct {
	// Text is what to shout.
	Text string `json:"text"`
}

func init() {
	host.Register(host.Plugin{
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
			return nil, host.AddTool(pctx, tool)
		}),
	})
}

func main() { dshcmd.Main() }
