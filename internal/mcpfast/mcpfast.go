// Package mcpfast is what answering a plain tools/call without the MCP
// SDK's dispatch needs to know of the SDK: how it decodes a call's
// parameters and decides its protocol, and the line it writes for the
// answer, byte for byte. The stdio transport (package mcpfront) runs the
// call through the same handler and writes that line; everything else goes
// to the SDK. Keeping this knowledge here, apart from the transport, is
// what lets an operator turn the fast path off (dsh serve
// --mcp-fast-path=false) and a test fail loudly when the SDK moves
// (TestSDKVersion): each detail below was checked against CheckedAgainst.
package mcpfast

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	segjson "github.com/segmentio/encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// CheckedAgainst is the version of github.com/modelcontextprotocol/go-sdk
// whose decoding and encoding this package reproduces.
const CheckedAgainst = "v1.8.0"

// PerRequestProtocol is the first protocol version whose requests carry
// their own _meta (SEP-2575). The SDK's own constant is unexported.
const PerRequestProtocol = "2026-07-28"

// DecodeFlags are the options the SDK decodes JSON-RPC messages with:
// field names match exactly.
const DecodeFlags = segjson.DontMatchCaseInsensitiveStructFields

// Params is what the fast path reads of a tools/call's params, in one
// pass with the SDK's decoder and options.
type Params struct {
	Meta           json.RawMessage `json:"_meta"`
	Name           string          `json:"name"`
	Arguments      json.RawMessage `json:"arguments"`
	InputResponses json.RawMessage `json:"inputResponses"`
	RequestState   json.RawMessage `json:"requestState"`
	// Versioned: the _meta names a protocol version, whatever its value
	// (over stateful HTTP the SDK refuses such a call).
	Versioned bool `json:"-"`
}

// meta is what the fast path reads of a tools/call's _meta.
type meta struct {
	ProgressToken   any `json:"progressToken"`
	ProtocolVersion any `json:"io.modelcontextprotocol/protocolVersion"`
	// ClientCapabilities are kept for the call: whether the client can be
	// asked (elicitation) is in them (mcp.CallToolRequest's
	// ClientCapabilities reads them from here).
	ClientCapabilities json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
}

// Decode decodes a tools/call's params into what the front's handler
// reads of them (the name, the arguments, the progress token), and
// reports whether they select the per-request protocol, as the SDK
// decides it. ok is false for params only the SDK should answer (it then
// decodes them, and reports any error).
func Decode(params json.RawMessage) (p *Params, raw *mcp.CallToolParamsRaw, perRequest, ok bool) {
	p = new(Params)
	if _, err := segjson.Parse(params, p, DecodeFlags); err != nil || !absent(p.InputResponses) || !absent(p.RequestState) {
		return nil, nil, false, false
	}
	raw = &mcp.CallToolParamsRaw{Name: p.Name, Arguments: p.Arguments}
	if absent(p.Meta) {
		return p, raw, false, true
	}
	var m meta
	if _, err := segjson.Parse(p.Meta, &m, DecodeFlags); err != nil || p.Meta[0] != '{' {
		return nil, nil, false, false
	}
	p.Versioned = m.ProtocolVersion != nil
	if m.ProgressToken != nil {
		raw.Meta = mcp.Meta{"progressToken": m.ProgressToken}
	}
	v, isString := m.ProtocolVersion.(string)
	if len(m.ClientCapabilities) > 0 && isString {
		if raw.Meta == nil {
			raw.Meta = mcp.Meta{}
		}
		raw.Meta[mcp.MetaKeyClientCapabilities] = m.ClientCapabilities
		raw.Meta[mcp.MetaKeyProtocolVersion] = v
	}
	return p, raw, isString && v >= PerRequestProtocol, true
}

func absent(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// Encoder writes the answers to calls as the SDK writes them, for a server
// with one implementation (its name and version).
type Encoder struct {
	// serverInfo is what the SDK puts in a per-request result's _meta.
	serverInfo     *mcp.Implementation
	serverInfoJSON []byte
	// complete is an empty result of type "complete"; nil if this SDK
	// does not produce one that way, and then per-request calls go to it.
	complete *mcp.CallToolResult
	// inputRequired is an empty result of type "input_required": the
	// answer to a call whose tool asks the client a question
	// (multi-round-trip requests).
	inputRequired *mcp.CallToolResult
}

// NewEncoder returns the encoder of a server that reports impl.
func NewEncoder(impl *mcp.Implementation) *Encoder {
	e := &Encoder{serverInfo: impl}
	e.serverInfoJSON, _ = json.Marshal(impl) // an Implementation always marshals
	// The result type is unexported: a result decoded from JSON holds it.
	var complete mcp.CallToolResult
	if json.Unmarshal([]byte(`{"content":[],"resultType":"complete"}`), &complete) == nil {
		if data, err := marshalResult(&complete); err == nil && bytes.Contains(data, []byte(`"resultType":"complete"`)) {
			e.complete = &complete
		}
	}
	var input mcp.CallToolResult
	if json.Unmarshal([]byte(`{"content":[],"resultType":"input_required"}`), &input) == nil {
		if data, err := marshalResult(&input); err == nil && bytes.Contains(data, []byte(`"resultType":"input_required"`)) {
			e.inputRequired = &input
		}
	}
	return e
}

// PerRequest reports whether the encoder can answer a call of the
// per-request protocol; where it cannot, such calls go to the SDK.
func (e *Encoder) PerRequest() bool { return e.complete != nil && e.inputRequired != nil }

// Answer appends to dst the line (with its newline) that answers call id
// with res, or with err, as the SDK would write it.
func (e *Encoder) Answer(dst []byte, id jsonrpc.ID, perRequest bool, res *mcp.CallToolResult, err error) ([]byte, error) {
	if text, ok := onlyText(res); ok && err == nil {
		return e.appendText(dst, id, perRequest, text, res.IsError), nil
	}
	line, err := e.encode(id, perRequest, res, err)
	if err != nil {
		return dst, err
	}
	return append(append(dst, line...), '\n'), nil
}

// onlyText returns the text of a result that is one plain text block.
func onlyText(res *mcp.CallToolResult) (string, bool) {
	if res == nil || len(res.Content) != 1 || res.Meta != nil || res.StructuredContent != nil || res.InputRequests != nil {
		return "", false
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok || tc.Meta != nil || tc.Annotations != nil {
		return "", false
	}
	return tc.Text, true
}

// appendText appends the answer to a call whose result is one text
// block, byte for byte as encode would (TestAppendText): the result the
// front returns for every call, made without the encoder's reflection.
func (e *Encoder) appendText(dst []byte, id jsonrpc.ID, perRequest bool, text string, isError bool) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	switch v := id.Raw().(type) {
	case int64:
		dst = strconv.AppendInt(dst, v, 10)
	default:
		data, _ := marshalResult(v) // a string
		dst = append(dst, data...)
	}
	dst = append(dst, `,"result":{`...)
	if perRequest {
		dst = append(dst, `"_meta":{"`+mcp.MetaKeyServerInfo+`":`...)
		dst = append(dst, e.serverInfoJSON...)
		dst = append(dst, "},"...)
	}
	dst = append(dst, `"content":[{"type":"text","text":`...)
	quoted, _ := json.Marshal(text) // HTML-escaped, as the result's MarshalJSON does
	dst = append(dst, quoted...)
	dst = append(dst, "}]"...)
	if isError {
		dst = append(dst, `,"isError":true`...)
	}
	if perRequest {
		dst = append(dst, `,"resultType":"complete"`...)
	}
	return append(dst, "}}\n"...)
}

// encode encodes the answer to a call the way the SDK does.
func (e *Encoder) encode(id jsonrpc.ID, perRequest bool, res *mcp.CallToolResult, err error) ([]byte, error) {
	resp := &jsonrpc.Response{ID: id, Error: err}
	if err == nil {
		switch {
		case perRequest && res.InputRequests != nil:
			// Questions for the client, as the SDK types them.
			r := *e.inputRequired
			r.Content, r.InputRequests, r.RequestState = res.Content, res.InputRequests, res.RequestState
			r.Meta = mcp.Meta{mcp.MetaKeyServerInfo: e.serverInfo}
			res = &r
		case perRequest:
			r := *e.complete
			r.Content, r.IsError, r.StructuredContent = res.Content, res.IsError, res.StructuredContent
			r.Meta = mcp.Meta{mcp.MetaKeyServerInfo: e.serverInfo}
			res = &r
		}
		if resp.Result, err = marshalResult(res); err != nil {
			return nil, fmt.Errorf("mcpfast: marshal result: %w", err)
		}
	}
	return jsonrpc.EncodeMessage(resp)
}

// marshalResult marshals v as the SDK marshals a result: without HTML
// escaping.
func marshalResult(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
