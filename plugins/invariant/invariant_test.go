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

// Augment adds the service and every companion beside its package's entry,
// groups included.
func TestAugment(t *testing.T) {
	reg := host.NewRegistry()
	for _, n := range []string{"a", "a-invariant", "b"} {
		reg.Register(host.Plugin{Name: n, Apply: func(*host.Context, any) error { return nil }})
	}
	d, err := host.ParseDeployment("d.yaml", []byte("- id: a\n  name: a\n- id: g\n  name: group\n  config:\n    - id: a2\n      name: a\n    - id: b\n      name: b\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	Augment(d, reg)
	var got []string
	var walk func([]*host.Entry)
	walk = func(list []*host.Entry) {
		for _, e := range list {
			got = append(got, e.Path+"="+e.Name)
			walk(e.Children)
		}
	}
	walk(d.Entries)
	want := "a=a g=group g:a2=a g:b=b g:a2-invariant=a-invariant a-invariant=a-invariant invariant=invariant"
	if strings.Join(got, " ") != want {
		t.Errorf("entries\n got %s\nwant %s", strings.Join(got, " "), want)
	}
}
