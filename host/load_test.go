package host

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestLoadOrderFollowsInject(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{
			name: "consumer before provider in the file",
			yaml: `
- id: user
  name: use-alpha
- id: provider
  name: svc-alpha
`,
			want: []string{"start provider", "start user using provider", "stop user", "stop provider"},
		},
		{
			name: "chain declared backwards",
			yaml: `
- {id: u-beta, name: use-beta}
- {id: u-alpha, name: use-alpha}
- {id: p-beta, name: svc-beta}
- {id: p-alpha, name: svc-alpha}
`,
			// Ties are broken by document order: p-beta is ready first.
			want: []string{"start p-beta", "start u-beta using p-beta", "start p-alpha", "start u-alpha using p-alpha",
				"stop u-alpha", "stop p-alpha", "stop u-beta", "stop p-beta"},
		},
		{
			name: "disabled entries and groups are skipped",
			yaml: `
- {id: p, name: svc-alpha}
- id: off
  name: use-alpha
  disabled: true
- id: g
  name: group
  disabled: true
  config:
    - {id: inner, name: use-beta}
`,
			want: []string{"start p", "stop p"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			h, err := Load(t.Context(), parse(t, tt.yaml), WithRegistry(testRegistry(rec)))
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := rec.list(); !slices.Equal(got, tt.want) {
				t.Fatalf("events:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string // the exact message
		is   error
	}{
		{
			name: "unknown plugin",
			yaml: "- id: x\n  name: nope\n",
			want: `test.yaml:1: entry "x": unknown plugin "nope" (registered: a, b, fail, lazy, panic, svc-alpha, svc-beta, svc-gamma, use-alpha, use-beta, use-gamma, group)`,
			is:   ErrUnknownPlugin,
		},
		{
			name: "missing provider",
			yaml: "- id: p\n  name: svc-beta\n- id: user\n  name: use-alpha\n",
			want: `test.yaml:3: entry "user" (use-alpha): no provider for service "alpha" (injected by plugin use-alpha)`,
			is:   ErrMissingProvider,
		},
		{
			name: "missing provider inside an isolated group",
			yaml: "- {id: p, name: svc-alpha}\n- id: g\n  name: group\n  isolate: {alpha: true}\n  config:\n    - {id: user, name: use-alpha}\n",
			want: `test.yaml:6: entry "g:user" (use-alpha): no provider for service "alpha" in the realm isolated by group "g" (injected by plugin use-alpha)`,
			is:   ErrMissingProvider,
		},
		{
			name: "duplicate service",
			yaml: "- id: one\n  name: svc-alpha\n- id: two\n  name: svc-alpha\n",
			want: `test.yaml:3: entry "two" (svc-alpha): service "alpha" has been registered (by entry "one" at line 1)`,
			is:   ErrDuplicateService,
		},
		{
			name: "cycle",
			yaml: "- id: first\n  name: a\n- id: second\n  name: b\n",
			want: `test.yaml:1: entry "first" (a): dependency cycle: entry "first" (a) injects "y" from entry "second" (b), which injects "x" from entry "first" (a)`,
			is:   ErrCycle,
		},
		{
			name: "duplicate id",
			yaml: "- id: p\n  name: svc-alpha\n- id: p\n  name: svc-beta\n",
			want: `test.yaml:3: entry "p": duplicate entry id "p" (first used at line 1)`,
			is:   ErrDuplicateID,
		},
		{
			name: "duplicate id by default name",
			yaml: "- name: svc-alpha\n- name: svc-alpha\n",
			want: `test.yaml:2: entry "svc-alpha": duplicate entry id "svc-alpha" (first used at line 1)`,
			is:   ErrDuplicateID,
		},
		{
			name: "unknown config key",
			yaml: "- id: p\n  name: svc-alpha\n  config:\n    label: x\n    limt: 3\n",
			want: `test.yaml:5: entry "p" (svc-alpha): unknown config key "limt" (known keys: enabled, extra, label, limit, nested, ratio, tags)`,
			is:   ErrInvalidConfig,
		},
		{
			name: "unknown nested config key",
			yaml: "- id: p\n  name: svc-alpha\n  config:\n    nested:\n      deep: 3\n",
			want: `test.yaml:5: entry "p" (svc-alpha): unknown config key "nested.deep" (known keys: depth)`,
			is:   ErrInvalidConfig,
		},
		{
			name: "wrong type",
			yaml: "- id: p\n  name: svc-alpha\n  config:\n    limit: lots\n",
			want: `test.yaml:4: entry "p" (svc-alpha): limit: expected an integer, got string "lots"`,
			is:   ErrInvalidConfig,
		},
		{
			name: "float for an integer",
			yaml: "- id: p\n  name: svc-alpha\n  config:\n    limit: 1.5\n",
			want: `test.yaml:4: entry "p" (svc-alpha): limit: expected an integer, got number 1.5`,
			is:   ErrInvalidConfig,
		},
		{
			name: "wrong type in a list",
			yaml: "- id: p\n  name: svc-alpha\n  config:\n    tags: [a, [b]]\n",
			want: `test.yaml:4: entry "p" (svc-alpha): tags[1]: expected a string, got a list`,
			is:   ErrInvalidConfig,
		},
		{
			name: "config not a mapping",
			yaml: "- id: p\n  name: svc-alpha\n  config: 3\n",
			want: `test.yaml:3: entry "p" (svc-alpha): expected a mapping, got integer 3`,
			is:   ErrInvalidConfig,
		},
		{
			name: "validation points at the field",
			yaml: "- id: p\n  name: svc-alpha\n  config:\n    label: x\n    limit: -1\n",
			want: `test.yaml:5: entry "p" (svc-alpha): svc: limit must be non-negative`,
			is:   ErrInvalidConfig,
		},
		{
			name: "validation of a nested field",
			yaml: "- id: p\n  name: svc-alpha\n  config:\n    nested:\n      depth: 11\n",
			want: `test.yaml:5: entry "p" (svc-alpha): svc: nested.depth must be at most 10`,
			is:   ErrInvalidConfig,
		},
		{
			name: "config for a plugin without config",
			yaml: "- id: u\n  name: use-alpha\n  config: {x: 1}\n- {id: p, name: svc-alpha}\n",
			want: `test.yaml:1: entry "u" (use-alpha): use-alpha takes no config`,
			is:   ErrInvalidConfig,
		},
		{
			name: "apply fails",
			yaml: "- id: f\n  name: fail\n",
			want: `test.yaml:1: entry "f" (fail): boom`,
		},
		{
			name: "apply panics",
			yaml: "- id: f\n  name: panic\n",
			want: `test.yaml:1: entry "f" (panic): plugin panic panicked while starting: kaboom`,
		},
		{
			name: "declared service not provided",
			yaml: "- id: l\n  name: lazy\n",
			want: `test.yaml:1: entry "l" (lazy): plugin lazy declares service "lazy" but did not provide it`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := ParseDeployment("test.yaml", []byte(tt.yaml), nil)
			if err == nil {
				_, err = Load(t.Context(), d, WithRegistry(testRegistry(&recorder{})))
			}
			if err == nil {
				t.Fatal("load succeeded")
			}
			if err.Error() != tt.want {
				t.Fatalf("error:\n got %s\nwant %s", err, tt.want)
			}
			var de *DeploymentError
			if !errors.As(err, &de) {
				t.Fatalf("error %T is not a *DeploymentError", err)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Fatalf("error does not match %v", tt.is)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"malformed YAML", "- id: x\n  name: [unclosed\n", `test.yaml:1: malformed YAML: did not find expected ',' or ']'`},
		{"tab indentation", "- id: x\n\tname: y\n", `test.yaml:2: malformed YAML: found a tab character that violates indentation`},
		{"not a list", "id: x\n", `test.yaml:1: the deployment must be a list of entries, got a mapping`},
		{"entry not a mapping", "- just-a-string\n", `test.yaml:1: an entry must be a mapping with id and name, got string "just-a-string"`},
		{"unknown entry key", "- id: x\n  name: svc-alpha\n  confg: {}\n", `test.yaml:3: unknown entry key "confg" (want one of id, name, config, disabled, isolate)`},
		{"missing name", "- id: x\n", `test.yaml:1: entry has no name`},
		{"bad id", "- id: a:b\n  name: svc-alpha\n", `test.yaml:1: id "a:b" must not contain ':' or spaces`},
		{"disabled not a bool", "- id: x\n  name: svc-alpha\n  disabled: maybe\n", `test.yaml:3: entry "x": disabled: expected a boolean, got string "maybe"`},
		{"isolate on a plugin", "- id: x\n  name: svc-alpha\n  isolate: {alpha: true}\n", `test.yaml:3: entry "x": isolate applies to groups only`},
		{"isolate bad value", "- id: g\n  name: group\n  isolate: {alpha: 3}\n", `test.yaml:3: entry "g": isolate.alpha must be true, false or a realm label, got integer 3`},
		{"group config not a list", "- id: g\n  name: group\n  config: {a: 1}\n", `test.yaml:3: entry "g": a group's config must be a list of entries, got a mapping`},
		{"duplicate key", "- id: x\n  id: y\n  name: svc-alpha\n", `test.yaml:2: duplicate key "id" (first at line 1)`},
		{"unterminated variable", "- id: x\n  name: ${NAME\n", `test.yaml:2: unterminated ${ in "${NAME"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseDeployment("test.yaml", []byte(tt.yaml), func(string) (string, bool) { return "", false })
			if err == nil {
				t.Fatal("parse succeeded")
			}
			if err.Error() != tt.want {
				t.Fatalf("error:\n got %s\nwant %s", err, tt.want)
			}
		})
	}
}

func TestEmptyDeployments(t *testing.T) {
	for _, text := range []string{"", "# nothing\n", "[]\n", "~\n"} {
		d, err := ParseDeployment("empty.yaml", []byte(text), nil)
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if len(d.Entries) != 0 {
			t.Fatalf("%q: %d entries", text, len(d.Entries))
		}
	}
}

func TestIsolation(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // "start" events, which name the provider each user got
	}{
		{
			name: "isolated provider is invisible outside, and shadows inside",
			yaml: `
- {id: outer, name: svc-alpha}
- id: g
  name: group
  isolate: {alpha: true}
  config:
    - {id: inner, name: svc-alpha}
    - {id: user, name: use-alpha}
    - {id: beta-user, name: use-beta}
- {id: outer-user, name: use-alpha}
- {id: beta, name: svc-beta}
`,
			want: []string{"start outer", "start g:inner", "start g:user using g:inner", "start outer-user using outer",
				"start beta", "start g:beta-user using beta"},
		},
		{
			name: "a shared label is one realm across groups",
			yaml: `
- id: g1
  name: group
  isolate: {alpha: shared}
  config:
    - {id: provider, name: svc-alpha}
- id: g2
  name: group
  isolate: {alpha: shared}
  config:
    - {id: user, name: use-alpha}
`,
			want: []string{"start g1:provider", "start g2:user using g1:provider"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			h, err := Load(t.Context(), parse(t, tt.yaml), WithRegistry(testRegistry(rec)))
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			var starts []string
			for _, e := range rec.list() {
				if strings.HasPrefix(e, "start") {
					starts = append(starts, e)
				}
			}
			if !slices.Equal(starts, tt.want) {
				t.Fatalf("starts:\n got %q\nwant %q", starts, tt.want)
			}
		})
	}
	t.Run("a private realm is not shared between groups", func(t *testing.T) {
		yaml := `
- id: g1
  name: group
  isolate: {alpha: true}
  config:
    - {id: provider, name: svc-alpha}
- id: g2
  name: group
  isolate: {alpha: true}
  config:
    - {id: user, name: use-alpha}
`
		_, err := Load(t.Context(), parse(t, yaml), WithRegistry(testRegistry(&recorder{})))
		if !errors.Is(err, ErrMissingProvider) {
			t.Fatalf("got %v, want a missing provider", err)
		}
	})
}

func TestConfigDecoding(t *testing.T) {
	yaml := `
- id: p
  name: svc-alpha
  config:
    label: "${LABEL:-fallback}"
    limit: ${LIMIT}
    ratio: 2
    enabled: ${ON:-true}
    tags: [x, "${LABEL}"]
    extra: {k: v}
    nested: {depth: 3}
- id: d
  name: svc-beta
- id: cost
  name: svc-gamma
  config:
    label: "$$5 and ${UNSET:-} end"
`
	env := map[string]string{"LIMIT": "7", "LABEL": ""}
	d, err := ParseDeployment("cfg.yaml", []byte(yaml), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	plan, err := Resolve(d, testRegistry(&recorder{}))
	if err != nil {
		t.Fatal(err)
	}
	got := plan.Steps[0].Config.(*testConfig)
	if got.Label != "fallback" || got.Limit != 7 || got.Ratio != 2 || !got.Enabled ||
		!slices.Equal(got.Tags, []string{"x", ""}) || got.Extra["k"] != "v" || got.Nested.Depth != 3 {
		t.Fatalf("decoded %+v", got)
	}
	if def := plan.Steps[1].Config.(*testConfig); def.Label != "default" || def.Limit != 5 {
		t.Fatalf("defaults not kept: %+v", def)
	}
	if c := plan.Steps[2].Config.(*testConfig); c.Label != "$5 and  end" {
		t.Fatalf("$$ escape: %q", c.Label)
	}
}

func TestExpandEnv(t *testing.T) {
	env := func(k string) (string, bool) {
		v, ok := map[string]string{"A": "1", "EMPTY": ""}[k]
		return v, ok
	}
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"${A}", "1"},
		{"x${A}y${A}", "x1y1"},
		{"${MISSING}", ""},
		{"${MISSING:-d}", "d"},
		{"${EMPTY:-d}", "d"},
		{"${A:-d}", "1"},
		{"$$", "$"},
		{"$A", "$A"},
		{"cost $", "cost $"},
		{"${MISSING:-a:-b}", "a:-b"},
	}
	for _, tt := range tests {
		got, err := expandEnv(tt.in, env)
		if err != nil || got != tt.want {
			t.Errorf("expandEnv(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	if _, err := expandEnv("${1BAD}", env); err == nil {
		t.Error("want an error for a bad name")
	}
}

func TestCloseRunsCleanupsInReverseAndJoinsErrors(t *testing.T) {
	reg := NewRegistry()
	var order []string
	reg.Register(Plugin{Name: "p", Apply: func(pctx *Context, _ any) (any, error) {
		for i := range 3 {
			pctx.Defer(func(ctx context.Context) error {
				order = append(order, pctx.EntryID()+string(rune('0'+i)))
				if i == 1 {
					return errors.New("cleanup " + pctx.EntryID() + " failed")
				}
				return nil
			})
		}
		pctx.Defer(func(context.Context) error { panic("bad cleanup") })
		return nil, nil
	}})
	d := parse(t, "- {id: first, name: p}\n- {id: second, name: p}\n")
	h, err := Load(t.Context(), d, WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	err = h.Close(t.Context())
	want := []string{"second2", "second1", "second0", "first2", "first1", "first0"}
	if !slices.Equal(order, want) {
		t.Fatalf("order %q, want %q", order, want)
	}
	for _, part := range []string{"cleanup first failed", "cleanup second failed", "cleanup panicked: bad cleanup"} {
		if err == nil || !strings.Contains(err.Error(), part) {
			t.Fatalf("close error %v lacks %q", err, part)
		}
	}
	if err2 := h.Close(t.Context()); err2 != err {
		t.Fatalf("second Close returned %v, want the first result", err2)
	}
}

func TestFailedStartUnloadsStartedPlugins(t *testing.T) {
	rec := &recorder{}
	d := parse(t, "- {id: p, name: svc-alpha}\n- {id: u, name: use-alpha}\n- {id: f, name: fail}\n")
	_, err := Load(t.Context(), d, WithRegistry(testRegistry(rec)))
	if err == nil {
		t.Fatal("load succeeded")
	}
	want := []string{"start p", "start u using p", "stop u", "stop p"}
	if got := rec.list(); !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

func TestLifetimeCancelledOnUnload(t *testing.T) {
	reg := NewRegistry()
	var lifetime context.Context
	reg.Register(Plugin{Name: "p", Apply: func(pctx *Context, _ any) (any, error) {
		lifetime = pctx.Lifetime()
		pctx.Defer(func(context.Context) error {
			if lifetime.Err() == nil {
				return errors.New("cleanup ran before the lifetime ended")
			}
			return nil
		})
		return nil, nil
	}})
	h, err := Load(t.Context(), parse(t, "- {id: p, name: p}\n"), WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	if lifetime.Err() != nil {
		t.Fatal("lifetime ended early")
	}
	if err := h.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(context.Cause(lifetime), ErrUnloaded) {
		t.Fatalf("cause %v", context.Cause(lifetime))
	}
}

func TestServiceLookupIsLimitedToInjectedKeys(t *testing.T) {
	reg := testRegistry(&recorder{})
	var lookupErr error
	reg.Register(Plugin{Name: "nosy", Apply: func(pctx *Context, _ any) (any, error) {
		_, lookupErr = Service[*service](pctx, "alpha")
		return nil, nil
	}})
	reg.Register(Plugin{Name: "wrongtype", Inject: []Key{"alpha"}, Apply: func(pctx *Context, _ any) (any, error) {
		_, err := Service[*Tools](pctx, "alpha")
		return nil, err
	}})
	h, err := Load(t.Context(), parse(t, "- {id: p, name: svc-alpha}\n- {id: n, name: nosy}\n"), WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(t.Context())
	if !errors.Is(lookupErr, ErrNotInjected) {
		t.Fatalf("lookup of an undeclared key: %v", lookupErr)
	}
	_, err = Load(t.Context(), parse(t, "- {id: p, name: svc-alpha}\n- {id: w, name: wrongtype}\n"), WithRegistry(reg))
	if err == nil || !strings.Contains(err.Error(), `service "alpha" is *host.service, not *host.Tools`) {
		t.Fatalf("wrong type lookup: %v", err)
	}
}

func TestRegisterPanicsOnProgrammerErrors(t *testing.T) {
	apply := func(*Context, any) (any, error) { return nil, nil }
	tests := []struct {
		name string
		p    Plugin
	}{
		{"empty name", Plugin{Apply: apply}},
		{"reserved name", Plugin{Name: "group", Apply: apply}},
		{"no apply", Plugin{Name: "x"}},
		{"nil config", Plugin{Name: "x", Apply: apply, Config: func() any { return nil }}},
		{"injects what it provides", Plugin{Name: "x", Apply: apply, Provides: []Key{"k"}, Inject: []Key{"k"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			NewRegistry().Register(tt.p)
		})
	}
	t.Run("duplicate", func(t *testing.T) {
		reg := NewRegistry()
		reg.Register(Plugin{Name: "x", Apply: apply})
		defer func() {
			if recover() == nil {
				t.Fatal("no panic")
			}
		}()
		reg.Register(Plugin{Name: "x", Apply: apply})
	})
}
