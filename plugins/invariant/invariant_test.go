package invariant

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dshdev/dsh/config"
	"github.com/dshdev/dsh/host"
)

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"blank", Config{PackageAllowlist: []string{" "}}, "invariants: packageAllowlist entries must be non-blank and have no surrounding whitespace"},
		{"padded", Config{PackageBlocklist: []string{" x"}}, "invariants: packageBlocklist entries must be non-blank and have no surrounding whitespace"},
		{"duplicate", Config{PackageAllowlist: []string{"a", "a"}}, `invariants: packageAllowlist contains duplicate regex "a"`},
		{"invalid", Config{PackageBlocklist: []string{"("}}, `invariants: packageBlocklist contains invalid regex "("`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if _, ok := errors.AsType[*config.FieldError](err); !ok || err.Error() != tc.want {
				t.Fatalf("got %v, want %s", err, tc.want)
			}
		})
	}
}

func TestRegisterAndSelect(t *testing.T) {
	svc, err := New(&Config{Enabled: true, PackageAllowlist: []string{"dsh"}, PackageBlocklist: []string{"blocked"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	failing := func(name string) Check {
		return Check{Name: name, Run: func(context.Context) error { return fmt.Errorf("%s broke", name) }}
	}
	for _, bad := range []string{"", "a b", "tab\there"} {
		if _, err := svc.Register(bad); err == nil || err.Error() != "invariants: packageName must be non-blank and contain no whitespace" {
			t.Errorf("Register(%q) = %v", bad, err)
		}
	}
	un, err := svc.Register("dsh/one", failing("first"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Register("dsh/one"); err == nil || err.Error() != `invariants: package "dsh/one" is already registered` {
		t.Errorf("duplicate: %v", err)
	}
	// Filtered out, but the name is still taken.
	if _, err := svc.Register("dsh/blocked", failing("hidden")); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Register("dsh/blocked"); err == nil {
		t.Error("a blocked package's name was not reserved")
	}
	if _, err := svc.Register("other", failing("unlisted")); err != nil {
		t.Fatal(err)
	}
	err = svc.Check(context.Background())
	if err == nil || err.Error() != `invariant violated by "dsh/one": first: first broke` {
		t.Fatalf("Check = %v", err)
	}
	if !errors.Is(err, ErrViolated) {
		t.Error("not ErrViolated")
	}
	if v := svc.TakeViolations(); len(v) != 1 || v[0].Package != "dsh/one" || v[0].Name != "first" {
		t.Errorf("violations %v", v)
	}
	// Unregistering runs the checks once more.
	if err := un(context.Background()); err == nil || !strings.Contains(err.Error(), "first broke") {
		t.Errorf("unregister = %v", err)
	}
	if got := strings.Join(svc.Packages(), " "); got != "dsh/blocked other" {
		t.Errorf("packages %q", got)
	}
}

func TestDisabledRunsNothing(t *testing.T) {
	svc, _ := New(&Config{Enabled: false}, nil)
	if _, err := svc.Register("p", Check{Name: "c", Run: func(context.Context) error { return errors.New("x") }}); err != nil {
		t.Fatal(err)
	}
	if err := svc.Check(context.Background()); err != nil {
		t.Errorf("disabled: %v", err)
	}
}

// Augment adds the service once, whatever the deployment holds.
func TestAugment(t *testing.T) {
	for _, doc := range []string{
		"- id: a\n  name: a\n",
		"- id: g\n  name: group\n  config:\n    - id: inv\n      name: invariant\n",
	} {
		d, err := host.ParseDeployment("d.yaml", []byte(doc), nil)
		if err != nil {
			t.Fatal(err)
		}
		Augment(d)
		Augment(d)
		n := 0
		var walk func([]*host.Entry)
		walk = func(list []*host.Entry) {
			for _, e := range list {
				if e.Name == PluginName {
					n++
				}
				walk(e.Children)
			}
		}
		walk(d.Entries)
		if n != 1 {
			t.Errorf("%q: %d invariants entries after Augment, want 1", doc, n)
		}
	}
}

// checked is a plugin instance with invariants: one that holds, and one
// that fails once its state says so. Its checks are taken once, so what
// they remember between runs is kept.
type checked struct{ broken, runs int }

func (c *checked) Invariants() map[string]func(context.Context) error {
	return map[string]func(context.Context) error{
		"runs-are-counted": func(context.Context) error { c.runs++; return nil },
		"never-broken": func(context.Context) error {
			if c.broken > 0 {
				return fmt.Errorf("broken %d time(s)", c.broken)
			}
			return nil
		},
	}
}

// The service finds the invariants of the host's plugin instances, runs
// them after every call under the package name of the instance's type,
// and its selection applies to them.
func TestInstanceInvariants(t *testing.T) {
	for _, block := range []bool{false, true} {
		reg := host.NewRegistry()
		inst := &checked{}
		reg.Register(host.Plugin{Name: "checked", Apply: func(*host.Context, any) (any, error) { return inst, nil }})
		reg.Register(host.Plugin{Name: PluginName, Inject: []host.Key{host.ToolsKey}, Provides: []host.Key{ServiceKey},
			Config: func() any { return DefaultConfig() }, Apply: host.Typed(apply)})
		cfg := ""
		if block {
			cfg = "\n  config: {packageBlocklist: [plugins/invariant$]}"
		}
		d, err := host.ParseDeployment("d.yaml", []byte("- id: c\n  name: checked\n- id: invariant\n  name: invariant"+cfg+"\n"), nil)
		if err != nil {
			t.Fatal(err)
		}
		h, err := host.Load(t.Context(), d, host.WithRegistry(reg))
		if err != nil {
			t.Fatal(err)
		}
		svc, err := host.Lookup[*Service](h, ServiceKey)
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.Check(t.Context()); err != nil {
			t.Fatalf("blocked %v: a healthy instance: %v", block, err)
		}
		inst.broken++
		err = svc.Check(t.Context())
		switch {
		case block && err != nil:
			t.Fatalf("a blocked package ran: %v", err)
		case !block && (!errors.Is(err, ErrViolated) || !strings.Contains(err.Error(), `invariant violated by "github.com/dshdev/dsh/plugins/invariant": never-broken: broken 1 time(s)`)):
			t.Fatalf("the broken instance: %v", err)
		case !block && inst.runs != 2:
			t.Fatalf("the instance's checks ran %d times, want 2 (taken once, run at each check)", inst.runs)
		}
		inst.broken = 0
		if err := h.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}
