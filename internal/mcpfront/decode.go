package mcpfront

import (
	"encoding/json"

	"github.com/dshdev/dsh/internal/mcpfast"
	segjson "github.com/segmentio/encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// decodeRequest decodes a line that holds a request or a notification
// into the message jsonrpc.DecodeMessage would make of it: the same
// decoder with the same options (segmentio/encoding, field names matched
// exactly), straight from the line. DecodeMessage goes through a
// json.Decoder, which allocates a 32 KiB buffer for each of its two
// passes: 20 µs and 66 KB for a tools/call (BenchmarkDecode).
//
// Anything else, and anything odd (a response, nesting DecodeMessage
// refuses, a field of the wrong type, another version tag, an id that is
// not one), reports false: the caller then decodes the line the SDK's
// way, which gives the SDK's own error.
func decodeRequest(line []byte) (*jsonrpc.Request, bool) {
	req, _, ok := decodeLine(line)
	return req, ok
}

// decodeLine is decodeRequest, which also reports whether the line is a
// plain request or notification: valid JSON, with a version tag, a
// method, an id JSON-RPC allows or none, and no result or error. For such
// a line the stdio transport's checks (lineConn.check) have nothing to
// say, and need not run.
func decodeLine(line []byte) (req *jsonrpc.Request, plain, ok bool) {
	if nestingDepth(line) > maxNesting {
		return nil, false, false
	}
	var m struct {
		VersionTag string          `json:"jsonrpc"`
		ID         json.RawMessage `json:"id,omitempty"`
		Method     json.RawMessage `json:"method"`
		Params     json.RawMessage `json:"params,omitempty"`
		Result     json.RawMessage `json:"result,omitempty"`
		Error      *jsonrpc.Error  `json:"error,omitempty"`
	}
	if _, err := segjson.Parse(line, &m, mcpfast.DecodeFlags); err != nil || m.VersionTag != "2.0" || len(m.Method) == 0 {
		return nil, false, false
	}
	var rawID any
	if len(m.ID) > 0 {
		if _, err := segjson.Parse(m.ID, &rawID, mcpfast.DecodeFlags); err != nil {
			return nil, false, false
		}
	}
	id, err := jsonrpc.MakeID(rawID)
	if err != nil {
		return nil, false, false
	}
	var method string
	if _, err := segjson.Parse(m.Method, &method, mcpfast.DecodeFlags); err != nil {
		return nil, false, false
	}
	plain = method != "" && (len(m.ID) == 0 || validID(m.ID) != nil) && len(m.Result) == 0 && m.Error == nil && segjson.Valid(line)
	return &jsonrpc.Request{ID: id, Method: method, Params: m.Params}, plain, true
}

// maxNesting is the deepest nesting of arrays and objects the SDK decodes.
const maxNesting = 1000

// nestingDepth is how deeply arrays and objects nest in data, which is one
// JSON value: brackets inside strings do not count.
func nestingDepth(data []byte) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range data {
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}
