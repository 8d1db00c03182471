package host

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// Plugin is the registration data of a plugin: what it is called, which
// services it needs and offers, its config with defaults, and how to start it.
// Plugins register in init(); a deployment names them.
type Plugin struct {
	// Name is what a deployment's `name` field selects, e.g. "terminal-bash".
	Name string
	// Summary is one line for `dsh check` and the catalogs.
	Summary string
	// Inject lists the service keys the plugin looks up. The loader starts
	// the providers of these keys (in the entry's realm) before this plugin.
	Inject []Key
	// Provides lists the service keys the plugin registers with
	// Context.Provide. Declaring them lets the loader order plugins and report
	// a missing or duplicate provider before anything starts.
	Provides []Key
	// Config returns a new config value (a pointer to a struct) holding the
	// defaults. The deployment's config is decoded strictly on top of it; if
	// the value has a `Validate() error` method it runs next. Nil means the
	// plugin takes no config.
	Config func() any
	// Apply starts the plugin with its decoded config (the value Config
	// returned, or nil) and returns its instance, or nil. Every
	// registration it makes must be undone by a cleanup passed to
	// Context.Defer. The host looks for optional interfaces on the instance
	// (see Instance): that is how a plugin is closed, checked and measured
	// without anyone importing it.
	Apply func(pctx *Context, config any) (any, error)
	// ShellWritable, for a plugin that runs confined shells, names the
	// host directories its decoded config lets a shell write below, given
	// workdir, the directory sessions start in by default. Load refuses a
	// deployment whose file or plugin executables lie there (see
	// ErrUntrusted). Nil: the plugin lets no confined shell write here.
	ShellWritable func(config any, workdir string) []string
}

// Typed adapts an apply function taking a concrete config pointer.
func Typed[C any](apply func(pctx *Context, config *C) (any, error)) func(*Context, any) (any, error) {
	return func(pctx *Context, config any) (any, error) {
		c, ok := config.(*C)
		if !ok {
			return nil, fmt.Errorf("host: plugin config is %T, want %T", config, (*C)(nil))
		}
		return apply(pctx, c)
	}
}

// GroupName is the reserved plugin name of a group entry.
const GroupName = "group"

// Registry holds plugin registrations by name. The package-level Register
// fills the default registry; tests build their own with NewRegistry.
type Registry struct {
	mu       sync.RWMutex
	plugins  map[string]Plugin
	external ExternalLoader
}

// ExternalLoader makes the registration of an entry whose name is a path to
// an executable (see IsExecutablePath): name as the entry wrote it, path
// resolved against the deployment file's directory. It runs when a
// deployment is resolved, so it should check what it can (the file is
// there and executable) and leave starting anything to Apply.
type ExternalLoader func(name, path string) (Plugin, error)

// IsExecutablePath reports whether a deployment entry's name is a path to
// an executable rather than the name of a registered plugin: it contains a
// slash, which no plugin name does ("./dsh-backend-ssh", "/opt/x/backend").
func IsExecutablePath(name string) bool { return strings.Contains(name, "/") }

// RegisterExternal sets the loader of entries that name an executable, in
// the default registry. The last call wins.
func RegisterExternal(load ExternalLoader) { defaultRegistry.RegisterExternal(load) }

// RegisterExternal sets the loader of entries that name an executable.
func (r *Registry) RegisterExternal(load ExternalLoader) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.external = load
}

// External returns the loader of entries that name an executable, or nil.
func (r *Registry) External() ExternalLoader {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.external
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{plugins: make(map[string]Plugin)} }

var defaultRegistry = NewRegistry()

// DefaultRegistry is the registry that Register fills and Load uses unless
// told otherwise.
func DefaultRegistry() *Registry { return defaultRegistry }

// Register adds a plugin to the default registry. It panics on a programmer
// error (empty or reserved name, nil Apply, duplicate), like http.Handle.
func Register(p Plugin) { defaultRegistry.Register(p) }

// Register adds a plugin; it panics on a programmer error.
func (r *Registry) Register(p Plugin) {
	switch {
	case p.Name == "":
		panic("host: plugin registered without a name")
	case p.Name == GroupName:
		panic("host: plugin name \"group\" is reserved")
	case IsExecutablePath(p.Name):
		panic(fmt.Sprintf("host: plugin name %q contains a slash, which marks an executable", p.Name))
	case p.Apply == nil:
		panic(fmt.Sprintf("host: plugin %q registered without Apply", p.Name))
	}
	for _, key := range p.Inject {
		if slices.Contains(p.Provides, key) {
			panic(fmt.Sprintf("host: plugin %q injects %q, which it provides itself", p.Name, key))
		}
	}
	if p.Config != nil {
		if c := p.Config(); c == nil {
			panic(fmt.Sprintf("host: plugin %q Config returned nil", p.Name))
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.plugins[p.Name]; dup {
		panic(fmt.Sprintf("host: plugin %q registered twice", p.Name))
	}
	r.plugins[p.Name] = p
}

// Lookup returns the plugin registered under name.
func (r *Registry) Lookup(name string) (Plugin, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.plugins[name]
	return p, ok
}

// Plugins returns every registration, sorted by name.
func (r *Registry) Plugins() []Plugin {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := slices.Sorted(maps.Keys(r.plugins))
	out := make([]Plugin, len(names))
	for i, n := range names {
		out[i] = r.plugins[n]
	}
	return out
}
