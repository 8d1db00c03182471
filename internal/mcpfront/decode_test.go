package mcpfront

import (
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// decodeCases are lines decodeRequest must decode exactly as the SDK
// does, or leave to it.
var decodeCases = []string{
	`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"bash","arguments":{"command":"true"},"_meta":{"progressToken":42}}}`,
	`{"jsonrpc":"2.0","id":"abc","method":"tools/list"}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`,
	`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":true,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1,"method":5}`,
	`{"jsonrpc":"2.0","id":1,"method":""}`,
	`{"jsonrpc":"1.0","id":1,"method":"ping"}`,
	`{"JSONRPC":"2.0","id":1,"method":"ping"}`,
	`{"jsonrpc":"2.0","ID":1,"Method":"ping"}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","error":"not an object"}`,
	`{"jsonrpc":"2.0","id":1,"result":{}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"x"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"a\"b\\c\u00e9","params":["[{","}]"]}`,
	`{"jsonrpc":"2.0","id":1,"method":"deep","params":` + strings.Repeat("[", 1001) + strings.Repeat("]", 1001) + `}`,
	`{"jsonrpc":"2.0","id":1,"method":"deep","params":` + strings.Repeat("[", 999) + strings.Repeat("]", 999) + `}`,
	`{"jsonrpc":"2.0","id":9007199254740993,"method":"big"}`,
}

func TestDecodeRequestMatchesSDK(t *testing.T) {
	for _, line := range decodeCases {
		checkDecode(t, []byte(line))
	}
	// The common messages take the direct path.
	for _, line := range decodeCases[:4] {
		if _, ok := decodeRequest([]byte(line)); !ok {
			t.Errorf("decodeRequest left %s to the SDK", line)
		}
	}
}

func FuzzDecodeRequest(f *testing.F) {
	for _, line := range decodeCases {
		f.Add([]byte(line))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		checkDecode(t, line)
		checkPlain(t, line)
	})
}

func TestPlainLines(t *testing.T) {
	for _, line := range decodeCases {
		checkPlain(t, []byte(line))
	}
	for _, line := range decodeCases[:4] {
		if _, plain, _ := decodeLine([]byte(line)); !plain {
			t.Errorf("decodeLine: %s is not plain", line)
		}
	}
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1e3,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping"} trailing`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","result":1}`,
		`{"jsonrpc":"2.0","id":1,"method":null}`,
	} {
		checkPlain(t, []byte(line))
		if _, plain, _ := decodeLine([]byte(line)); plain {
			t.Errorf("decodeLine: %s is plain", line)
		}
	}
}

// checkPlain fails when the stdio transport's short cut for a plain line
// gives another message than its full checks, or takes a line they
// reject.
func checkPlain(t *testing.T, line []byte) {
	t.Helper()
	if len(line) == 0 || line[0] != '{' {
		return
	}
	got, plain, _ := decodeLine(line)
	if !plain {
		return
	}
	var answers strings.Builder
	c := &lineConn{out: &answers, log: slog.New(slog.DiscardHandler), pending: make(map[string]bool), closed: make(chan struct{})}
	want := c.checkSlowly(line, false)
	if want == nil || answers.Len() > 0 {
		t.Fatalf("decodeLine took %q, which the checks reject: %s", line, answers.String())
	}
	if !reflect.DeepEqual(jsonrpc.Message(got), want) {
		t.Fatalf("decodeLine(%q) = %#v, the checks give %#v", line, got, want)
	}
}

// checkDecode fails when decodeRequest decodes line to anything but what
// the SDK decodes it to. Lines it leaves to the SDK are fine.
func checkDecode(t *testing.T, line []byte) {
	t.Helper()
	got, ok := decodeRequest(line)
	if !ok {
		return
	}
	want, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		t.Fatalf("decodeRequest decoded %q, which the SDK refuses: %v", line, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeRequest(%q) = %#v, the SDK decodes %#v", line, got, want)
	}
}

func TestNestingDepth(t *testing.T) {
	for in, want := range map[string]int{
		`1`:              0,
		`{}`:             1,
		`[[{}],[]]`:      3,
		`{"a":"[[[["}`:   1,
		`["\"[[", "\\"]`: 1,
	} {
		if got := nestingDepth([]byte(in)); got != want {
			t.Errorf("nestingDepth(%s) = %d, want %d", in, got, want)
		}
	}
}

// BenchmarkDecode compares the SDK's decoding of a tools/call line with
// decodeRequest's.
func BenchmarkDecode(b *testing.B) {
	line := []byte(decodeCases[0])
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := jsonrpc.DecodeMessage(line); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := decodeRequest(line); !ok {
				b.Fatal("not decoded")
			}
		}
	})
}
