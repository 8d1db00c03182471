package host

import (
	"context"
	"encoding/json"
	"errors"

	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"github.com/dshdev/dsh/internal/schema"
)

// Key names a service that plugins provide and inject ("tools",
// "terminals"). Each package that provides one declares its key as a
// constant of this type.
type Key string

// ToolsKey is the service key of the host's tools service.
const ToolsKey Key = "tools"

// Tool is a model-facing tool: a name, a description and an argument schema
// the model sees, and the function that runs a call.
type Tool struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the arguments: an object, using the
	// keywords internal/schema reflects. NewTool fills it from a struct.
	InputSchema json.RawMessage
	// Instructions, optional, tell the model how to use the tool well, as a
	// whole (what persists, how long output and waiting programs are
	// handled). A front gives them to clients, MCP as the server's
	// instructions, which clients show the model.
	Instructions string
	// Run executes one call. Arguments have been validated against
	// InputSchema, except that top-level keys it does not define are
	// ignored (and left in Call.Args). The returned text is the result; an
	// error becomes an error result whose text is the error's message.
	Run func(ctx context.Context, call Call) (string, error)
}

// Call is one invocation of a tool.
type Call struct {
	Owner *Owner
	Args  json.RawMessage
}

// Result is the outcome of a tool call as the model sees it: text, and
// whether it is an error. Err keeps the underlying error of an error result
// for callers that branch on it (errors.Is with ErrUnknownTool,
// ErrInvalidArguments, ErrToolPanic, context.Canceled, ...).
type Result struct {
	Text    string
	IsError bool
	Err     error
}

// ToolInfo describes a registered tool.
type ToolInfo struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	Instructions string          `json:"instructions,omitempty"`
}

// AddDocComments registers doc comments for the schemas of tool arguments
// and plugin configs of packages outside dsh's module, keyed
// "importpath.Type.Field" ("main.Type.Field" in a program's own package):
// a deployed binary has no source to read them from. Do not write the map
// by hand: `go run github.com/dshdev/dsh/cmd/dsh-doc-comments` in the
// package (a go:generate line) writes a file whose init calls this.
func AddDocComments(m map[string]string) { schema.AddComments(m) }

// NewTool builds a Tool whose arguments are the struct A: the schema is
// reflected from A (field doc comments become descriptions) and run receives
// the decoded value.
func NewTool[A any](name, description string, run func(ctx context.Context, owner *Owner, args A) (string, error)) (Tool, error) {
	var zero A
	raw, err := schema.ReflectInput(&zero)
	if err != nil {
		return Tool{}, fmt.Errorf("tool %q: %w", name, err)
	}
	return Tool{
		Name:        name,
		Description: description,
		InputSchema: raw,
		Run: func(ctx context.Context, call Call) (string, error) {
			var args A
			if len(call.Args) > 0 {
				if err := json.Unmarshal(call.Args, &args); err != nil {
					return "", errorf(ErrInvalidArguments, "invalid arguments: %v", err)
				}
			}
			return run(ctx, call.Owner, args)
		},
	}, nil
}

// Tools is the host's tool registry (service key "tools"). It is safe for
// concurrent use.
type Tools struct {
	logger *slog.Logger
	mu     sync.RWMutex
	tools  map[string]*registeredTool
	checks map[*func(context.Context) error]struct{}
}

type registeredTool struct {
	Tool
	schema *argSchema
}

func newTools(logger *slog.Logger) *Tools {
	return &Tools{logger: logger, tools: make(map[string]*registeredTool)}
}

// validToolName is MCP's rule for tool names: 1 to 128 characters of
// A-Z, a-z, 0-9, underscore, hyphen and dot.
func validToolName(name string) bool {
	if name == "" || len(name) > 128 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// AddTool registers tool with the host's tools service, injected as
// ToolsKey, for as long as the plugin is loaded: its unload removes it.
// It is what a tool plugin's Apply calls.
func AddTool(pctx *Context, tool Tool) error {
	tools, err := Service[*Tools](pctx, ToolsKey)
	if err != nil {
		return err
	}
	unregister, err := tools.Register(tool)
	if err != nil {
		return err
	}
	pctx.Defer(func(context.Context) error { unregister(); return nil })
	return nil
}

// Register adds a tool. The returned function removes it again (it removes
// only this registration, even if the name was registered anew since).
func (t *Tools) Register(tool Tool) (unregister func(), err error) {
	if !validToolName(tool.Name) {
		return nil, fmt.Errorf("host: tool name %q: want 1 to 128 of A-Z, a-z, 0-9, '_', '-' and '.' (the MCP rule)", tool.Name)
	}
	if strings.TrimSpace(tool.Description) == "" {
		return nil, fmt.Errorf("host: tool %q needs a description", tool.Name)
	}
	if tool.Run == nil {
		return nil, fmt.Errorf("host: tool %q has no Run function", tool.Name)
	}
	s, err := compileSchema(tool.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("host: tool %q: %w", tool.Name, err)
	}
	rt := &registeredTool{Tool: tool, schema: s}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, dup := t.tools[tool.Name]; dup {
		return nil, errorf(ErrDuplicateTool, "tool %q is already registered", tool.Name)
	}
	t.tools[tool.Name] = rt
	return func() {
		t.mu.Lock()
		if t.tools[tool.Name] == rt {
			delete(t.tools, tool.Name)
		}
		t.mu.Unlock()
	}, nil
}

// List returns the registered tools sorted by name.
func (t *Tools) List() []ToolInfo {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]ToolInfo, 0, len(t.tools))
	for _, name := range slices.Sorted(maps.Keys(t.tools)) {
		rt := t.tools[name]
		out = append(out, ToolInfo{Name: rt.Name, Description: rt.Description, InputSchema: rt.InputSchema, Instructions: rt.Instructions})
	}
	return out
}

// Call runs the tool name for owner. Every failure is an error result, never
// a crash: an unknown tool, arguments that do not match the schema
// ("invalid arguments: ..."), an error from the tool, and a panic in it.
func (t *Tools) Call(ctx context.Context, owner *Owner, name string, args json.RawMessage) Result {
	t.mu.RLock()
	rt, ok := t.tools[name]
	t.mu.RUnlock()
	if !ok {
		return errorResult(errorf(ErrUnknownTool, "unknown tool %q", name))
	}
	if owner == nil {
		return errorResult(fmt.Errorf("tool %q called without an owner", name))
	}
	v, err := decodeArgs(args)
	if err != nil {
		return errorResult(errorf(ErrInvalidArguments, "invalid arguments: %v", err))
	}
	ignored := rt.schema.unknownKeys(v)
	if err := rt.schema.validate(v, ""); err != nil {
		if len(ignored) > 0 { // a misspelt key explains a missing one
			err = fmt.Errorf("%w (ignored unknown %s)", err, quotedList("property", "properties", ignored))
		}
		return errorResult(errorf(ErrInvalidArguments, "invalid arguments: %v", err))
	}
	if len(ignored) > 0 {
		t.logger.Debug("ignored unknown argument keys", "tool", name, "keys", ignored)
	}
	text, err := t.run(ctx, rt, Call{Owner: owner, Args: args})
	if cerr := t.check(ctx); cerr != nil {
		t.logger.Error("a check failed after a tool call", "tool", name, "owner", owner.ID(), "err", cerr)
		return errorResult(errorf(ErrCheckFailed, "%v", cerr))
	}
	if err != nil {
		return errorResult(err)
	}
	return Result{Text: text}
}

// AddCheck runs check after every call from now on, until remove is
// called. A check that fails turns the call's result into an error result
// (ErrCheckFailed) with the check's message, and is logged: for runtime
// invariants, which must fail loudly. Checks run one after another, in no
// set order, on the caller's goroutine; they should be cheap.
func (t *Tools) AddCheck(check func(ctx context.Context) error) (remove func()) {
	key := &check
	t.mu.Lock()
	if t.checks == nil {
		t.checks = make(map[*func(context.Context) error]struct{})
	}
	t.checks[key] = struct{}{}
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		delete(t.checks, key)
		t.mu.Unlock()
	}
}

// check runs the checks added with AddCheck.
func (t *Tools) check(ctx context.Context) error {
	t.mu.RLock()
	if len(t.checks) == 0 {
		t.mu.RUnlock()
		return nil
	}
	checks := make([]func(context.Context) error, 0, len(t.checks))
	for c := range t.checks {
		checks = append(checks, *c)
	}
	t.mu.RUnlock()
	var errs []error
	for _, c := range checks {
		if err := c(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (t *Tools) run(ctx context.Context, rt *registeredTool, call Call) (text string, err error) {
	defer func() {
		if r := recover(); r != nil {
			t.logger.Error("tool panicked", "tool", rt.Name, "owner", call.Owner.ID(), "panic", r, "stack", string(debug.Stack()))
			err = errorf(ErrToolPanic, "tool %q failed: internal error (panic: %v)", rt.Name, r)
		}
	}()
	return rt.Run(ctx, call)
}

func errorResult(err error) Result {
	return Result{Text: err.Error(), IsError: true, Err: err}
}
