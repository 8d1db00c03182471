package host

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// echoArgs are the arguments of the test echo tool.
type echoArgs struct {
	Text  string `json:"text" jsonschema:"minLength=1" jsonschema_description:"Text is echoed back."`
	Times int    `json:"times,omitempty" jsonschema:"minimum=1,maximum=3"`
	Mode  string `json:"mode,omitempty" jsonschema:"enum=plain,enum=loud"`
}

func newToolsHost(t *testing.T) (*Host, *Owner) {
	t.Helper()
	h := emptyHost(t)
	t.Cleanup(func() { h.Close(context.Background()) })
	echo, err := NewTool("echo", "Echo text.", func(ctx context.Context, owner *Owner, a echoArgs) (string, error) {
		if a.Text == "fail" {
			return "", errors.New("echo failed on purpose")
		}
		if a.Text == "panic" {
			panic("tool bug")
		}
		out := strings.Repeat(a.Text, max(a.Times, 1))
		if a.Mode == "loud" {
			out = strings.ToUpper(out)
		}
		return owner.ID() + ":" + out, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Tools().Register(echo); err != nil {
		t.Fatal(err)
	}
	o, err := h.NewOwner("agent", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return h, o
}

func TestToolCall(t *testing.T) {
	h, owner := newToolsHost(t)
	tests := []struct {
		name    string
		tool    string
		args    string
		want    string
		isError bool
		is      error
	}{
		{"ok", "echo", `{"text":"hi"}`, "agent:hi", false, nil},
		{"options", "echo", `{"text":"hi","times":2,"mode":"loud"}`, "agent:HIHI", false, nil},
		{"a float is not an integer", "echo", `{"text":"a","times":2.0}`, `invalid arguments: "times" must be an integer, got number 2.0`, true, ErrInvalidArguments},
		{"missing required", "echo", `{}`, `invalid arguments: missing required property "text"`, true, ErrInvalidArguments},
		{"empty body", "echo", ``, `invalid arguments: missing required property "text"`, true, ErrInvalidArguments},
		{"wrong type", "echo", `{"text":5}`, `invalid arguments: "text" must be a string, got number 5`, true, ErrInvalidArguments},
		{"min length", "echo", `{"text":""}`, `invalid arguments: "text" must be at least 1 characters long`, true, ErrInvalidArguments},
		{"minimum", "echo", `{"text":"a","times":0}`, `invalid arguments: "times" must be at least 1`, true, ErrInvalidArguments},
		{"not an integer", "echo", `{"text":"a","times":1.5}`, `invalid arguments: "times" must be an integer, got number 1.5`, true, ErrInvalidArguments},
		{"enum", "echo", `{"text":"a","mode":"quiet"}`, `invalid arguments: "mode" must be one of ["plain","loud"], got string "quiet"`, true, ErrInvalidArguments},
		{"unknown keys are ignored", "echo", `{"text":"a","wait_for_previous":true}`, "agent:a", false, nil},
		{"a misspelt key is named", "echo", `{"txet":"b"}`, `invalid arguments: missing required property "text" (ignored unknown property "txet")`, true, ErrInvalidArguments},
		{"misspelt keys are named", "echo", `{"txet":"b","tmies":2}`, `invalid arguments: missing required property "text" (ignored unknown properties "tmies", "txet")`, true, ErrInvalidArguments},
		{"not an object", "echo", `[1]`, `invalid arguments: arguments must be an object, got an array`, true, ErrInvalidArguments},
		{"malformed JSON", "echo", `{"text":`, `invalid arguments: arguments are not valid JSON: unexpected EOF`, true, ErrInvalidArguments},
		{"trailing data", "echo", `{"text":"a"} {}`, `invalid arguments: arguments are not valid JSON: trailing data`, true, ErrInvalidArguments},
		{"tool error", "echo", `{"text":"fail"}`, "echo failed on purpose", true, nil},
		{"tool panic", "echo", `{"text":"panic"}`, `tool "echo" failed: internal error (panic: tool bug)`, true, ErrToolPanic},
		{"unknown tool", "nope", `{}`, `unknown tool "nope"`, true, ErrUnknownTool},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := h.Tools().Call(t.Context(), owner, tt.tool, json.RawMessage(tt.args))
			if res.Text != tt.want || res.IsError != tt.isError {
				t.Fatalf("got %q (error %v), want %q (error %v)", res.Text, res.IsError, tt.want, tt.isError)
			}
			if tt.is != nil && !errors.Is(res.Err, tt.is) {
				t.Fatalf("Err %v does not match %v", res.Err, tt.is)
			}
		})
	}
	// The host is still fine after a panic.
	if res := h.Tools().Call(t.Context(), owner, "echo", json.RawMessage(`{"text":"ok"}`)); res.IsError {
		t.Fatalf("after panic: %q", res.Text)
	}
}

func TestToolRegistry(t *testing.T) {
	h, _ := newToolsHost(t)
	tools := h.Tools()
	run := func(context.Context, Call) (string, error) { return "", nil }
	obj := json.RawMessage(`{"type":"object","properties":{}}`)
	bad := []Tool{
		{Name: "", Description: "d", InputSchema: obj, Run: run},
		{Name: "has space", Description: "d", InputSchema: obj, Run: run},
		{Name: "has/slash", Description: "d", InputSchema: obj, Run: run},
		{Name: "ünicode", Description: "d", InputSchema: obj, Run: run},
		{Name: strings.Repeat("x", 129), Description: "d", InputSchema: obj, Run: run},
		{Name: "nodesc", Description: " ", InputSchema: obj, Run: run},
		{Name: "norun", Description: "d", InputSchema: obj},
		{Name: "notobject", Description: "d", InputSchema: json.RawMessage(`{"type":"string"}`), Run: run},
		{Name: "unsupported", Description: "d", InputSchema: json.RawMessage(`{"type":"object","oneOf":[]}`), Run: run},
	}
	for _, tool := range bad {
		if _, err := tools.Register(tool); err == nil {
			t.Errorf("Register(%q) accepted a bad tool", tool.Name)
		}
	}
	dup := Tool{Name: "echo", Description: "again", InputSchema: obj, Run: run}
	if _, err := tools.Register(dup); !errors.Is(err, ErrDuplicateTool) {
		t.Fatalf("duplicate: %v", err)
	}
	unregister, err := tools.Register(Tool{Name: "aaa", Description: "first", InputSchema: obj, Run: run})
	if err != nil {
		t.Fatal(err)
	}
	list := tools.List()
	if len(list) != 2 || list[0].Name != "aaa" || list[1].Name != "echo" {
		t.Fatalf("list %+v", list)
	}
	var schema map[string]any
	if err := json.Unmarshal(list[1].InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	props := schema["properties"].(map[string]any)
	if props["text"].(map[string]any)["description"] != "Text is echoed back." {
		t.Fatalf("description not in the schema: %s", list[1].InputSchema)
	}
	unregister()
	unregister() // harmless twice
	if len(tools.List()) != 1 {
		t.Fatal("unregister did not remove the tool")
	}
}

func TestToolCallPassesContext(t *testing.T) {
	h := emptyHost(t)
	defer h.Close(context.Background())
	tool, err := NewTool("wait", "Wait for cancellation.", func(ctx context.Context, _ *Owner, _ struct{}) (string, error) {
		<-ctx.Done()
		return "", context.Cause(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Tools().Register(tool); err != nil {
		t.Fatal(err)
	}
	o, _ := h.NewOwner("a", ".")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res := h.Tools().Call(ctx, o, "wait", nil)
	if !res.IsError || !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("cancelled call: %+v", res)
	}
}

// TestAddToolLastsAsLongAsThePlugin: a tool added through the plugin's
// context is gone once the plugin unloads.
func TestAddToolLastsAsLongAsThePlugin(t *testing.T) {
	reg := NewRegistry()
	reg.Register(Plugin{Name: "adder", Inject: []Key{ToolsKey}, Apply: func(pctx *Context, _ any) (any, error) {
		tool, err := NewTool("added", "Added.", func(context.Context, *Owner, struct{}) (string, error) { return "", nil })
		if err != nil {
			return nil, err
		}
		return nil, AddTool(pctx, tool)
	}})
	d, err := ParseDeployment("t.yaml", []byte("- id: adder\n  name: adder\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := Load(t.Context(), d, WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	if l := h.Tools().List(); len(l) != 1 || l[0].Name != "added" {
		t.Fatalf("tools while loaded: %v", l)
	}
	if err := h.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if l := h.Tools().List(); len(l) != 0 {
		t.Fatalf("tools after unload: %v", l)
	}
}

func TestKindErrorf(t *testing.T) {
	err := KindErrorf(ErrUnknownTool, "no tool %q here", "x")
	if err.Error() != `no tool "x" here` || !errors.Is(err, ErrUnknownTool) {
		t.Fatalf("KindErrorf gave %q (is %v)", err, errors.Is(err, ErrUnknownTool))
	}
}

// A check added with AddCheck runs after every call; a failing one makes
// the call an error result, and removing it ends that.
func TestToolCheckAfterCall(t *testing.T) {
	h, owner := newToolsHost(t)
	runs := 0
	remove := h.Tools().AddCheck(func(context.Context) error {
		runs++
		if runs == 2 {
			return errors.New("state went wrong")
		}
		return nil
	})
	ctx := context.Background()
	if res := h.Tools().Call(ctx, owner, "echo", json.RawMessage(`{"text":"a"}`)); res.IsError || res.Text != "agent:a" {
		t.Fatalf("first call: %+v", res)
	}
	res := h.Tools().Call(ctx, owner, "echo", json.RawMessage(`{"text":"b"}`))
	if !res.IsError || !errors.Is(res.Err, ErrCheckFailed) || res.Text != "state went wrong" {
		t.Fatalf("second call: %+v", res)
	}
	remove()
	if res := h.Tools().Call(ctx, owner, "echo", json.RawMessage(`{"text":"c"}`)); res.IsError || runs != 2 {
		t.Fatalf("after remove: %+v, %d runs", res, runs)
	}
}
