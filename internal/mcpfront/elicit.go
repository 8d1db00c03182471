package mcpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshdev/dsh/host"
)

// A tool asks the person at the client through host.Asker (see package
// host). How depends on the protocol the call speaks:
//
//   - up to 2025-11-25 the server may ask while it answers a call: the
//     elicitor sends elicitation/create and waits for the answer;
//   - from 2026-07-28 it may not (SEP-2322, multi-round-trip requests):
//     the asker answers host.InputRequired at once, the call's result
//     carries the question (inputRequests) and the tool's state
//     (requestState), and the client asks the person and calls again with
//     the answer (inputResponses), which the tool finds with
//     host.ResumptionFrom.
//
// A client that did not declare elicitation gets no asker.

// multiRoundTripVersion is the first protocol version whose servers ask
// through the call's result; the SDK's own constant is unexported.
const multiRoundTripVersion = "2026-07-28"

// secretField is the form's one field; secretRequest the id of the
// question in a call's inputRequests.
const (
	secretField   = "secret"
	secretRequest = "secret"
)

// withAsker puts in ctx what a tool of this call needs to ask the person:
// an asker when the client can be asked, and the answer when the call is
// a client's retry with one. later reports that questions go with the
// call's result.
func withAsker(ctx context.Context, req *mcp.CallToolRequest) (_ context.Context, later bool) {
	if cannotBeAsked(req) {
		return ctx, false
	}
	caps := req.ClientCapabilities()
	if caps == nil || caps.Elicitation == nil || (caps.Elicitation.Form == nil && caps.Elicitation.URL != nil) {
		// A client that names neither mode can do forms (the
		// specification's first version had no modes).
		return ctx, false
	}
	later = req.ProtocolVersion() >= multiRoundTripVersion || req.ProtocolVersion() == ""
	if p := req.Params; p != nil && (len(p.InputResponses) > 0 || p.RequestState != "") {
		ctx = host.WithResumption(ctx, host.Resumption{State: p.RequestState, Answer: answerOf(p.InputResponses[secretRequest])})
	}
	if later {
		return host.WithAsker(ctx, asksLater{}), true
	}
	return host.WithAsker(ctx, elicitor{req.Session}), false
}

// answerOf reads the person's answer from an elicitation result.
func answerOf(resp mcp.InputResponse) host.Answer {
	res, ok := resp.(*mcp.ElicitResult)
	if !ok || res == nil {
		return host.Answer{Action: host.AnswerCancel}
	}
	if res.Action != host.AnswerAccept {
		return host.Answer{Action: res.Action}
	}
	secret, ok := res.Content[secretField].(string)
	if !ok {
		return host.Answer{Action: host.AnswerCancel}
	}
	return host.Answer{Action: host.AnswerAccept, Secret: secret}
}

// secretForm is the elicitation that asks for one secret string.
func secretForm(message string) *mcp.ElicitParams {
	return &mcp.ElicitParams{
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
	}
}

// elicitor asks a session's user through elicitation/create, during the
// call. The answer is returned to the tool and nowhere else: it is not
// logged.
type elicitor struct{ ss *mcp.ServerSession }

func (e elicitor) AskSecret(ctx context.Context, message string) (host.Answer, error) {
	res, err := e.ss.Elicit(ctx, secretForm(message))
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

// asksLater is the asker of a multi-round-trip call: the question goes
// with the result.
type asksLater struct{}

func (asksLater) AskSecret(_ context.Context, message string) (host.Answer, error) {
	return host.Answer{}, &host.InputRequired{Message: message}
}

// inputRequired is the result of a call whose tool asked a question.
func inputRequired(ask *host.InputRequired) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{secretRequest: secretForm(ask.Message)},
		RequestState:  ask.State,
	}
}

// cannotBeAsked reports, without the SDK's decoding of the capabilities a
// call carries (a JSON round trip of its _meta at every call), that
// req.ClientCapabilities() has no elicitation: neither the _meta's
// capabilities, a JSON object, nor the session's initialize name it. The
// SDK reads the _meta's first, and the session's when it has none or they
// do not decode, so with neither naming it, it finds none either way.
// False means the SDK must decide (a key spelled in any case counts as
// naming it, as a decoder might match it).
func cannotBeAsked(req *mcp.CallToolRequest) bool {
	if req.Session != nil {
		if ip := req.Session.InitializeParams(); ip != nil && ip.Capabilities != nil && ip.Capabilities.Elicitation != nil {
			return false
		}
	}
	if req.Params == nil {
		return true
	}
	raw, ok := req.Params.GetMeta()[mcp.MetaKeyClientCapabilities]
	if !ok || raw == nil {
		return true
	}
	switch caps := raw.(type) {
	case map[string]any:
		for k := range caps {
			if strings.EqualFold(k, "elicitation") {
				return false
			}
		}
		return true
	case json.RawMessage:
		// As the fast path leaves them (mcpfast.Decode). The word
		// anywhere, in any case, leaves the decision to the SDK.
		return !containsFold(caps, "elicitation")
	}
	return false
}

// containsFold reports whether s holds word (lower-case ASCII) in any
// case, without the copy bytes.ToLower would make.
func containsFold(s []byte, word string) bool {
	for i := 0; i+len(word) <= len(s); i++ {
		j := 0
		for j < len(word) && s[i+j]|0x20 == word[j] {
			j++
		}
		if j == len(word) {
			return true
		}
	}
	return false
}
