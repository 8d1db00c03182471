package mcpfront

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshdev/dsh/host"
)

// canElicit reports whether the session's client declared that it can ask
// its user for input (the elicitation capability, form mode).
func canElicit(ss *mcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	p := ss.InitializeParams()
	if p == nil || p.Capabilities == nil || p.Capabilities.Elicitation == nil {
		return false
	}
	e := p.Capabilities.Elicitation
	// A client that names neither mode can do forms (the specification's
	// first version had no modes).
	return e.Form != nil || e.URL == nil
}

// elicitor asks a session's user through MCP elicitation (a form with one
// string field). The answer is returned to the tool and nowhere else: it
// is not logged.
type elicitor struct{ ss *mcp.ServerSession }

// secretField is the form's one field.
const secretField = "secret"

func (e elicitor) AskSecret(ctx context.Context, message string) (host.Answer, error) {
	res, err := e.ss.Elicit(ctx, &mcp.ElicitParams{
		Mode:    "form",
		Message: message,
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				secretField: map[string]any{
					"type":        "string",
					"title":       "Secret",
					"description": "Goes to the program only; the model never sees it.",
				},
			},
			"required": []string{secretField},
		},
	})
	if err != nil {
		return host.Answer{}, fmt.Errorf("mcpfront: elicitation: %w", err)
	}
	switch res.Action {
	case host.AnswerAccept:
		secret, ok := res.Content[secretField].(string)
		if !ok {
			return host.Answer{}, fmt.Errorf("mcpfront: elicitation: the client accepted without a %q string", secretField)
		}
		return host.Answer{Action: host.AnswerAccept, Secret: secret}, nil
	case host.AnswerDecline, host.AnswerCancel:
		return host.Answer{Action: res.Action}, nil
	}
	return host.Answer{}, fmt.Errorf("mcpfront: elicitation: unknown action %q", res.Action)
}
