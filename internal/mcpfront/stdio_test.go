package mcpfront

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func TestReadLine(t *testing.T) {
	const max = 10
	input := "short\r\n" + strings.Repeat("x", max) + "\n" + strings.Repeat("y", max+1) + "\n  padded  \nlast"
	r := bufio.NewReaderSize(strings.NewReader(input), 16)
	want := []struct {
		line    string
		tooLong bool
	}{{"short", false}, {strings.Repeat("x", max), false}, {"", true}, {"padded", false}, {"last", false}}
	for i, w := range want {
		line, tooLong, err := readLine(r, max)
		if string(line) != w.line || tooLong != w.tooLong {
			t.Errorf("line %d = %q (too long %v), want %q (%v)", i, line, tooLong, w.line, w.tooLong)
		}
		if i == len(want)-1 && err != io.EOF {
			t.Errorf("last line: err %v, want io.EOF", err)
		}
	}
}

func TestValidID(t *testing.T) {
	for raw, ok := range map[string]bool{`1`: true, `"a"`: true, `-7`: true, `1.5`: false, `1e3`: false, `{}`: false, `[1]`: false, `true`: false, `null`: false} {
		if got := validID(json.RawMessage(raw)) != nil; got != ok {
			t.Errorf("validID(%s) = %v, want %v", raw, got, ok)
		}
	}
}

// TestIDKey: a cancellation names its request by an id decoded as any JSON
// value; it must match the id the request came with, and only that one.
func TestIDKey(t *testing.T) {
	for _, tt := range []struct {
		wire   string
		cancel any
		same   bool
	}{
		{`5`, float64(5), true},
		{`"5"`, "5", true},
		{`5`, "5", false},
		{`"a"`, "b", false},
	} {
		msg, err := jsonrpc.DecodeMessage([]byte(`{"jsonrpc":"2.0","id":` + tt.wire + `,"method":"ping"}`))
		if err != nil {
			t.Fatal(err)
		}
		id, err := jsonrpc.MakeID(tt.cancel)
		if err != nil {
			t.Fatal(err)
		}
		if got := idKey(msg.(*jsonrpc.Request).ID) == idKey(id); got != tt.same {
			t.Errorf("id %s against cancel %#v: same %v, want %v", tt.wire, tt.cancel, got, tt.same)
		}
	}
}
