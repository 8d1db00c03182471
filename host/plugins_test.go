package host

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/dshdev/dsh/config"
)

// recorder collects what the test plugins do, in order.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	r.events = append(r.events, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

// testConfig is the config of the "svc" test plugin.
type testConfig struct {
	Label   string            `json:"label"`
	Limit   int               `json:"limit"`
	Ratio   float64           `json:"ratio"`
	Enabled bool              `json:"enabled"`
	Tags    []string          `json:"tags"`
	Extra   map[string]string `json:"extra"`
	Nested  struct {
		Depth int `json:"depth"`
	} `json:"nested"`
}

func (c *testConfig) Validate() error {
	if c.Limit < 0 {
		return config.FieldErrorf("limit", "svc: limit must be non-negative")
	}
	if c.Nested.Depth > 10 {
		return config.FieldErrorf("nested.depth", "svc: nested.depth must be at most 10")
	}
	return nil
}

// testRegistry registers plugins that provide and inject named services and
// record their lifecycle:
//
//	svc-<k>: provides k (config testConfig)
//	use-<k>: injects k
//	a, b:    a injects y and provides x; b injects x and provides y (a cycle)
//	fail:    Apply fails
//	panic:   Apply panics
//	lazy:    declares "lazy" but never provides it
func testRegistry(rec *recorder) *Registry {
	reg := NewRegistry()
	for _, key := range []Key{"alpha", "beta", "gamma"} {
		reg.Register(Plugin{
			Name:     "svc-" + string(key),
			Provides: []Key{key},
			Config:   func() any { return &testConfig{Label: "default", Limit: 5} },
			Apply: Typed(func(pctx *Context, cfg *testConfig) (any, error) {
				rec.add("start %s", pctx.EntryID())
				if err := pctx.Provide(key, &service{name: pctx.EntryID(), label: cfg.Label}); err != nil {
					return nil, err
				}
				pctx.Defer(func(context.Context) error {
					rec.add("stop %s", pctx.EntryID())
					return nil
				})
				return nil, nil
			}),
		})
		reg.Register(Plugin{
			Name:   "use-" + string(key),
			Inject: []Key{key},
			Apply: func(pctx *Context, _ any) (any, error) {
				svc, err := Service[*service](pctx, key)
				if err != nil {
					return nil, err
				}
				rec.add("start %s using %s", pctx.EntryID(), svc.name)
				pctx.Defer(func(context.Context) error {
					rec.add("stop %s", pctx.EntryID())
					return nil
				})
				return nil, nil
			},
		})
	}
	reg.Register(Plugin{Name: "a", Inject: []Key{"y"}, Provides: []Key{"x"}, Apply: provideAll})
	reg.Register(Plugin{Name: "b", Inject: []Key{"x"}, Provides: []Key{"y"}, Apply: provideAll})
	reg.Register(Plugin{Name: "fail", Apply: func(*Context, any) (any, error) { return nil, errors.New("boom") }})
	reg.Register(Plugin{Name: "panic", Apply: func(*Context, any) (any, error) { panic("kaboom") }})
	reg.Register(Plugin{Name: "lazy", Provides: []Key{"lazy"}, Apply: func(*Context, any) (any, error) { return nil, nil }})
	return reg
}

type service struct{ name, label string }

func provideAll(pctx *Context, _ any) (any, error) {
	for _, key := range pctx.step.Plugin.Provides {
		if err := pctx.Provide(key, &service{name: pctx.EntryID()}); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

func parse(t *testing.T, yamlText string) *Deployment {
	t.Helper()
	d, err := ParseDeployment("test.yaml", []byte(strings.TrimLeft(yamlText, "\n")), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return d
}

// closingInstance records when it is closed, relative to its plugin's own
// cleanups.
type closingInstance struct{ events *[]string }

func (c closingInstance) Close(context.Context) error {
	*c.events = append(*c.events, "instance closed")
	return errors.New("close failed")
}

// An instance is listed while its plugin is loaded, and closed when it
// unloads, after the cleanups the plugin deferred; its error is the
// unload's.
func TestInstanceListedThenClosedLast(t *testing.T) {
	var events []string
	reg := NewRegistry()
	reg.Register(Plugin{Name: "inst", Apply: func(pctx *Context, _ any) (any, error) {
		pctx.Defer(func(context.Context) error { events = append(events, "cleanup"); return nil })
		return closingInstance{&events}, nil
	}})
	reg.Register(Plugin{Name: "none", Apply: func(*Context, any) (any, error) { return nil, nil }})
	d, err := ParseDeployment("t.yaml", []byte("- id: a\n  name: inst\n- id: b\n  name: none\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := Load(t.Context(), d, WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	insts := h.Instances()
	if len(insts) != 1 || insts[0].Entry != "a" || insts[0].Plugin != "inst" {
		t.Fatalf("instances %+v, want the one of entry a", insts)
	}
	err = h.Close(t.Context())
	if err == nil || !strings.Contains(err.Error(), `unload entry "a" (inst): close failed`) {
		t.Fatalf("close = %v, want the instance's error", err)
	}
	if strings.Join(events, ", ") != "cleanup, instance closed" {
		t.Fatalf("events %q, want the cleanup, then the instance closed", events)
	}
	if len(h.Instances()) != 0 {
		t.Fatal("instances listed after the host closed")
	}
}
