package mcpfront_test

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/internal/mcpfront"
)

type echoArgs struct {
	Text string `json:"text"`
}

// A Front serves a host's tools to MCP clients, one owner per session;
// here over in-memory transports, as a test or an embedding program would.
func ExampleFront_Serve() {
	ctx := context.Background()
	h, err := host.Load(ctx, &host.Deployment{Source: "example"}, host.WithRegistry(host.NewRegistry()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close(ctx)
	tool, _ := host.NewTool("echo", "Echo a text.", func(_ context.Context, _ *host.Owner, a echoArgs) (string, error) {
		return a.Text, nil
	})
	if _, err := h.Tools().Register(tool); err != nil {
		fmt.Println(err)
		return
	}

	front := mcpfront.New(h, mcpfront.Options{Workdir: "."})
	defer front.Close(ctx)
	clientT, serverT := mcp.NewInMemoryTransports()
	served := make(chan error, 1)
	go func() { served <- front.Serve(ctx, serverT) }()

	client := mcp.NewClient(&mcp.Implementation{Name: "example", Version: "1"}, nil)
	cs, err := client.Connect(ctx, clientT, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)
	cs.Close()
	fmt.Println(<-served) // the client left: a normal end
	// Output:
	// hi
	// <nil>
}
