package invariant

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/dshdev/dsh/config"
	"github.com/dshdev/dsh/host"
)

// ServiceKey is the service key of the invariants service.
const ServiceKey host.Key = "invariants"

// PluginName is the name deployments use for the service's plugin.
const PluginName = "invariant"

// Check is one named invariant of a package.
type Check struct {
	// Name says what holds, as a short phrase: "sessions-have-live-owners".
	Name string
	// Run returns nil while the invariant holds, or an error saying what it
	// saw. It must be safe to call from any goroutine and should be cheap:
	// it runs after every tool call.
	Run func(ctx context.Context) error
}

// ErrViolated matches every *Violation.
var ErrViolated = errors.New("invariant violated")

// Violation is a check that failed.
type Violation struct {
	Package, Name string
	Err           error
}

func (v *Violation) Error() string {
	return fmt.Sprintf("invariant violated by %q: %s: %v", v.Package, v.Name, v.Err)
}

func (v *Violation) Unwrap() error        { return v.Err }
func (v *Violation) Is(target error) bool { return target == ErrViolated }

// Config selects the packages whose invariants run.
type Config struct {
	// Enabled runs the selected packages' invariants; false runs none.
	Enabled bool `json:"enabled"`
	// PackageAllowlist, when not empty, selects only the packages whose
	// name one of these regular expressions matches (unanchored).
	PackageAllowlist []string `json:"packageAllowlist"`
	// PackageBlocklist leaves out the packages whose name one of these
	// regular expressions matches; it wins over the allowlist.
	PackageBlocklist []string `json:"packageBlocklist"`
}

// DefaultConfig is what a deployment starts from: every package.
func DefaultConfig() *Config { return &Config{Enabled: true} }

// Validate checks the lists as the original does, with its messages.
func (c *Config) Validate() error {
	for _, l := range []struct {
		field string
		list  []string
	}{{"packageAllowlist", c.PackageAllowlist}, {"packageBlocklist", c.PackageBlocklist}} {
		seen := map[string]bool{}
		for _, src := range l.list {
			switch {
			case strings.TrimSpace(src) == "" || strings.TrimSpace(src) != src:
				return config.FieldErrorf(l.field, "invariants: %s entries must be non-blank and have no surrounding whitespace", l.field)
			case seen[src]:
				return config.FieldErrorf(l.field, "invariants: %s contains duplicate regex %q", l.field, src)
			}
			if _, err := regexp.Compile(src); err != nil {
				return config.FieldErrorf(l.field, "invariants: %s contains invalid regex %q", l.field, src)
			}
			seen[src] = true
		}
	}
	return nil
}

// Service holds the registered packages. All methods are safe for
// concurrent use.
type Service struct {
	enabled bool
	allow   []*regexp.Regexp
	block   []*regexp.Regexp
	log     *slog.Logger
	// instances lists the host's loaded plugin instances, whose checks
	// (host.Checker) run beside the registered packages'; nil outside a
	// host.
	instances func() []host.Instance

	mu         sync.Mutex
	packages   map[string]*pkg
	found      map[any]*pkg // the checks of instances seen, by instance
	violations []*Violation
}

type pkg struct {
	name     string
	entry    string // the deployment entry of an instance's checks
	selected bool
	checks   []Check
	// running serialises the package's checks, which may keep what they
	// saw between runs.
	running sync.Mutex
}

// New returns a service for cfg, which must be valid. log may be nil.
func New(cfg *Config, log *slog.Logger) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{enabled: cfg.Enabled, log: log, packages: make(map[string]*pkg), found: make(map[any]*pkg)}
	for _, src := range cfg.PackageAllowlist {
		s.allow = append(s.allow, regexp.MustCompile(src))
	}
	for _, src := range cfg.PackageBlocklist {
		s.block = append(s.block, regexp.MustCompile(src))
	}
	return s, nil
}

func (s *Service) selects(name string) bool {
	match := func(res []*regexp.Regexp) bool {
		return slices.ContainsFunc(res, func(re *regexp.Regexp) bool { return re.MatchString(name) })
	}
	return s.enabled && (len(s.allow) == 0 || match(s.allow)) && !match(s.block)
}

// Register adds a package's checks under its name (the import path). The
// returned function runs them one last time and removes them: call it
// when the package's plugin unloads, and its error says what broke on the
// way out. A name is taken once, selected or not.
func (s *Service) Register(name string, checks ...Check) (unregister func(context.Context) error, err error) {
	if name == "" || strings.ContainsFunc(name, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }) {
		return nil, errors.New("invariants: packageName must be non-blank and contain no whitespace")
	}
	for _, c := range checks {
		if c.Name == "" || c.Run == nil {
			return nil, fmt.Errorf("invariants: package %q: every check needs a name and a function", name)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, taken := s.packages[name]; taken {
		return nil, fmt.Errorf("invariants: package %q is already registered", name)
	}
	p := &pkg{name: name, selected: s.selects(name), checks: checks}
	s.packages[name] = p
	return func(ctx context.Context) error {
		err := s.run(ctx, p)
		s.mu.Lock()
		delete(s.packages, name)
		s.mu.Unlock()
		return err
	}, nil
}

// Check runs every selected package's checks, the registered ones and
// those of the host's plugin instances, and returns the violations, joined
// (each a *Violation), or nil.
func (s *Service) Check(ctx context.Context) error {
	pkgs := s.current()
	slices.SortFunc(pkgs, func(a, b *pkg) int {
		return cmp.Or(strings.Compare(a.name, b.name), strings.Compare(a.entry, b.entry))
	})
	var errs []error
	for _, p := range pkgs {
		if err := s.run(ctx, p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// current returns the packages to run: the registered ones, and one per
// plugin instance that has invariants. An instance's checks are taken the
// first time it is seen, so that they may keep what they saw; those of
// instances that have gone are forgotten.
func (s *Service) current() []*pkg {
	var instances []host.Instance
	if s.instances != nil {
		instances = s.instances()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pkgs := make([]*pkg, 0, len(s.packages)+len(instances))
	for _, p := range s.packages {
		pkgs = append(pkgs, p)
	}
	live := make(map[any]bool, len(instances))
	for _, inst := range instances {
		c, ok := inst.Value.(host.Checker)
		if !ok {
			continue
		}
		live[inst.Value] = true
		p := s.found[inst.Value]
		if p == nil {
			name := packageOf(inst.Value)
			p = &pkg{name: name, entry: inst.Entry, selected: s.selects(name)}
			checks := c.Invariants()
			for _, n := range slices.Sorted(maps.Keys(checks)) {
				p.checks = append(p.checks, Check{Name: n, Run: checks[n]})
			}
			s.found[inst.Value] = p
		}
		pkgs = append(pkgs, p)
	}
	maps.DeleteFunc(s.found, func(v any, _ *pkg) bool { return !live[v] })
	return pkgs
}

// packageOf is the import path of the package that defines v's type: the
// name an instance's invariants go by.
func packageOf(v any) string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.PkgPath()
}

// run runs one package's checks, if it is selected.
func (s *Service) run(ctx context.Context, p *pkg) error {
	if !p.selected {
		return nil
	}
	p.running.Lock()
	defer p.running.Unlock()
	var errs []error
	for _, c := range p.checks {
		if err := c.Run(ctx); err != nil {
			v := &Violation{Package: p.name, Name: c.Name, Err: err}
			s.log.Error("invariant violated", "package", p.name, "entry", p.entry, "invariant", c.Name, "err", err)
			s.mu.Lock()
			s.violations = append(s.violations, v)
			s.mu.Unlock()
			errs = append(errs, v)
		}
	}
	return errors.Join(errs...)
}

// TakeViolations returns the violations seen since the last call, oldest
// first, and forgets them: for a test harness that checks, at its end,
// that none happened even where no call reported it.
func (s *Service) TakeViolations() []*Violation {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.violations
	s.violations = nil
	return v
}

// Packages lists the names of the packages whose checks the service runs,
// registered or found on plugin instances, sorted and without repeats.
func (s *Service) Packages() []string {
	var names []string
	for _, p := range s.current() {
		names = append(names, p.name)
	}
	slices.Sort(names)
	return slices.Compact(names)
}
