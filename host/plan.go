package host

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dshdev/dsh/config"
)

// Realm names a service namespace. The zero Realm is the root. A group
// with `isolate: {key: true}` gets a private realm for that key, named by
// the group's path; `isolate: {key: label}` selects the realm of that
// label, shared by every group that names it.
type Realm struct {
	// Group is the path of the group whose private realm this is.
	Group string
	// Label names a shared realm.
	Label string
}

// IsRoot reports whether r is the root realm.
func (r Realm) IsRoot() bool { return r == Realm{} }

// String is "" for the root, "#<group path>" for a group's private realm and
// "@<label>" for a shared one.
func (r Realm) String() string {
	switch {
	case r.Group != "":
		return "#" + r.Group
	case r.Label != "":
		return "@" + r.Label
	}
	return ""
}

// builtinProviders are the services the host itself offers, in the root realm.
var builtinProviders = []Key{ToolsKey}

// Plan is a deployment resolved against a registry: the enabled plugin
// entries in load order, each with its decoded, validated config and its
// service wiring. Nothing has started yet.
type Plan struct {
	Source string
	Steps  []*Step
}

// Step is one plugin entry of a plan.
type Step struct {
	Entry  *Entry
	Plugin Plugin
	Config any
	// Deps maps each injected key to the step providing it; nil means the
	// host provides it.
	Deps map[Key]*Step
	// Executable is the absolute path of the plugin's executable when the
	// entry names one (see IsExecutablePath).
	Executable string

	scope map[Key]Realm // the entry's realm for every isolated key
	order int           // position in the document, for stable ordering
}

// Realm returns the realm in which the step looks up or provides key.
func (s *Step) Realm(key Key) Realm { return s.scope[key] }

type serviceRef struct {
	key   Key
	realm Realm
}

// Resolve checks a deployment against a registry and orders its plugins so
// that every provider starts before the plugins that inject its services.
// Errors are *DeploymentError values naming the entry, plugin and key.
func Resolve(d *Deployment, reg *Registry) (*Plan, error) {
	if reg == nil {
		reg = defaultRegistry
	}
	r := &resolver{d: d, reg: reg, providers: make(map[serviceRef]*Step)}
	for _, key := range builtinProviders {
		r.providers[serviceRef{key, Realm{}}] = nil
	}
	if err := r.collect(d.Entries, map[Key]Realm{}); err != nil {
		return nil, err
	}
	if err := r.wire(); err != nil {
		return nil, err
	}
	order, err := r.sort()
	if err != nil {
		return nil, err
	}
	return &Plan{Source: d.Source, Steps: order}, nil
}

type resolver struct {
	d         *Deployment
	reg       *Registry
	steps     []*Step
	providers map[serviceRef]*Step
}

func (r *resolver) fail(e *Entry, plugin string, err error) error {
	return &DeploymentError{File: r.d.Source, Line: e.Line, Entry: e.Path, Plugin: plugin, Err: err}
}

func (r *resolver) collect(entries []*Entry, scope map[Key]Realm) error {
	for _, e := range entries {
		if e.Disabled {
			continue
		}
		if e.IsGroup() {
			inner := scope
			if len(e.Isolate) > 0 {
				inner = make(map[Key]Realm, len(scope)+len(e.Isolate))
				for k, v := range scope {
					inner[k] = v
				}
				for key, label := range e.Isolate {
					if label == "" {
						inner[key] = Realm{Group: e.Path}
					} else {
						inner[key] = Realm{Label: label}
					}
				}
			}
			if err := r.collect(e.Children, inner); err != nil {
				return err
			}
			continue
		}
		p, exe, err := r.lookup(e)
		if err != nil {
			return err
		}
		cfg, err := r.config(e, p)
		if err != nil {
			return err
		}
		s := &Step{Entry: e, Plugin: p, Config: cfg, Executable: exe, Deps: make(map[Key]*Step), scope: scope, order: len(r.steps)}
		for _, key := range p.Provides {
			ref := serviceRef{key, s.Realm(key)}
			prev, taken := r.providers[ref]
			if taken {
				by := "the host"
				if prev != nil {
					by = fmt.Sprintf("entry %q at line %d", prev.Entry.Path, prev.Entry.Line)
				}
				return r.fail(e, p.Name, errorf(ErrDuplicateService, "service %q has been registered (by %s)%s", key, by, realmNote(ref.realm)))
			}
			r.providers[ref] = s
		}
		r.steps = append(r.steps, s)
	}
	return nil
}

// lookup finds the plugin an entry names: a registered one, or for a path
// the registration the external loader makes of that executable. A
// relative path is relative to the deployment file's directory (to the
// working directory for a deployment that is not a file).
func (r *resolver) lookup(e *Entry) (Plugin, string, error) {
	if !IsExecutablePath(e.Name) {
		p, ok := r.reg.Lookup(e.Name)
		if !ok {
			return Plugin{}, "", r.fail(e, "", errorf(ErrUnknownPlugin, "unknown plugin %q (registered: %s)", e.Name, strings.Join(r.names(), ", ")))
		}
		return p, "", nil
	}
	load := r.reg.External()
	if load == nil {
		return Plugin{}, "", r.fail(e, "", errorf(ErrUnknownPlugin, "%q is a path, and this host loads no executables as plugins", e.Name))
	}
	path := e.Name
	if !filepath.IsAbs(path) {
		base := "."
		if r.d.File != "" {
			base = filepath.Dir(r.d.File)
		}
		path = filepath.Join(base, path)
	}
	// Absolute, so that it is never looked up in $PATH ("./x" joined to
	// "." is "x") and does not depend on the working directory later.
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	// And with its symbolic links resolved: what CheckTrust checks is what
	// runs, at load and at every restart of the plugin, whatever a link on
	// the way is changed to later.
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	p, err := load(e.Name, path)
	if err != nil {
		return Plugin{}, "", r.fail(e, e.Name, errorf(ErrUnknownPlugin, "%v", err))
	}
	return p, path, nil
}

func (r *resolver) names() []string {
	var names []string
	for _, p := range r.reg.Plugins() {
		names = append(names, p.Name)
	}
	return append(names, GroupName)
}

// config decodes an entry's config strictly over the plugin's defaults, then
// runs its Validate method.
func (r *resolver) config(e *Entry, p Plugin) (any, error) {
	if p.Config == nil {
		if e.config != nil && !(e.config.Tag == "!!null") {
			return nil, r.fail(e, p.Name, errorf(ErrInvalidConfig, "%s takes no config", p.Name))
		}
		return nil, nil
	}
	cfg := p.Config()
	if e.config != nil {
		if err := decodeStrict(e.config, cfg); err != nil {
			var de *decodeError
			if errors.As(err, &de) {
				return nil, &DeploymentError{File: r.d.Source, Line: de.line, Entry: e.Path, Plugin: p.Name,
					Err: errorf(ErrInvalidConfig, "%s", de.Error())}
			}
			return nil, r.fail(e, p.Name, err)
		}
	}
	if v, ok := cfg.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			line := e.Line
			var fe *config.FieldError
			if errors.As(err, &fe) {
				if l := fieldLine(e.config, fe.Field); l > 0 {
					line = l
				}
			}
			return nil, &DeploymentError{File: r.d.Source, Line: line, Entry: e.Path, Plugin: p.Name,
				Err: &kindError{msg: err.Error(), kind: errors.Join(ErrInvalidConfig, err)}}
		}
	}
	return cfg, nil
}

func realmNote(realm Realm) string {
	switch {
	case realm.Group != "":
		return fmt.Sprintf(" in the realm isolated by group %q", realm.Group)
	case realm.Label != "":
		return fmt.Sprintf(" in the realm labelled %q", realm.Label)
	}
	return ""
}

func (r *resolver) wire() error {
	for _, s := range r.steps {
		for _, key := range s.Plugin.Inject {
			ref := serviceRef{key, s.Realm(key)}
			p, ok := r.providers[ref]
			if !ok {
				return r.fail(s.Entry, s.Plugin.Name, errorf(ErrMissingProvider,
					"no provider for service %q%s (injected by plugin %s)", key, realmNote(ref.realm), s.Plugin.Name))
			}
			if p == s {
				return r.fail(s.Entry, s.Plugin.Name, errorf(ErrCycle, "dependency cycle: plugin %s injects %q, which it provides itself", s.Plugin.Name, key))
			}
			s.Deps[key] = p
		}
	}
	return nil
}

// sort orders steps so providers come first; among steps that are ready at
// the same time, document order wins, so the order is deterministic.
func (r *resolver) sort() ([]*Step, error) {
	pending := make(map[*Step]int, len(r.steps))
	dependents := make(map[*Step][]*Step)
	for _, s := range r.steps {
		seen := make(map[*Step]bool)
		for _, p := range s.Deps {
			if p != nil && !seen[p] {
				seen[p] = true
				pending[s]++
				dependents[p] = append(dependents[p], s)
			}
		}
	}
	var ready, out []*Step
	for _, s := range r.steps {
		if pending[s] == 0 {
			ready = append(ready, s)
		}
	}
	for len(ready) > 0 {
		slices.SortFunc(ready, func(a, b *Step) int { return a.order - b.order })
		s := ready[0]
		ready = ready[1:]
		out = append(out, s)
		for _, d := range dependents[s] {
			if pending[d]--; pending[d] == 0 {
				ready = append(ready, d)
			}
		}
	}
	if len(out) == len(r.steps) {
		return out, nil
	}
	return nil, r.cycleError(pending)
}

// cycleError walks from a blocked step along its dependencies until a step
// repeats, and describes that loop.
func (r *resolver) cycleError(pending map[*Step]int) error {
	var start *Step
	for _, s := range r.steps {
		if pending[s] > 0 {
			start = s
			break
		}
	}
	index := make(map[*Step]int)
	var path []*Step
	var keys []Key
	for s := start; ; {
		if i, ok := index[s]; ok {
			path, keys = path[i:], keys[i:]
			break
		}
		index[s] = len(path)
		path = append(path, s)
		// Follow the first (sorted) dependency that is itself blocked.
		deps := make([]Key, 0, len(s.Deps))
		for k := range s.Deps {
			deps = append(deps, k)
		}
		slices.Sort(deps)
		for _, k := range deps {
			if p := s.Deps[k]; p != nil && pending[p] > 0 {
				keys = append(keys, k)
				s = p
				break
			}
		}
	}
	var b strings.Builder
	for i, s := range path {
		if i > 0 {
			b.WriteString(", which ")
		} else {
			fmt.Fprintf(&b, "entry %q (%s) ", s.Entry.Path, s.Plugin.Name)
		}
		next := path[(i+1)%len(path)]
		fmt.Fprintf(&b, "injects %q from entry %q (%s)", keys[i], next.Entry.Path, next.Plugin.Name)
	}
	first := path[0]
	return r.fail(first.Entry, first.Plugin.Name, errorf(ErrCycle, "dependency cycle: %s", b.String()))
}
