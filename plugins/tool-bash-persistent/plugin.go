package bashtool

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/dshdev/dsh/config"
	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/internal/private"
	"github.com/dshdev/dsh/plugins/terminal"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// PluginName is the plugin's registered name.
const PluginName = "tool-bash-persistent"

// ToolName is the name the model calls.
const ToolName = "bash"

func init() {
	host.Register(host.Plugin{
		Name:    PluginName,
		Summary: "the bash tool: one persistent shell per agent, on a terminals backend",
		Inject:  []host.Key{host.ToolsKey, terminal.ServiceKey},
		Config:  func() any { return DefaultConfig() },
		Apply:   host.Typed(apply),
	})
}

// Args are the bash tool's arguments.
type Args struct {
	// The bash command to run. Relative path is preferred in the command.
	Command string `json:"command"`
	// Timeout in milliseconds, at most the default.
	TimeoutMs int `json:"timeoutMs,omitempty" jsonschema:"minimum=1"`
	// Run as a background job: answer at once; its output comes with later results.
	Background bool `json:"background,omitempty"`
}

var (
	errEmptyCommand = errors.New("command must be a non-empty string")
	errNULCommand   = errors.New("command contains a NUL byte, which bash cannot run")
	errTimedOut     = errors.New("persistent bash command timed out")
	errUnloaded     = errors.New("tool-bash-persistent was unloaded")
	errOwnerClosed  = errors.New("the agent's session closed")
)

// plugin is one loaded instance of the tool.
type plugin struct {
	cfg      *Config
	terms    *terminal.Service
	lifetime context.Context
	logger   *slog.Logger

	mu       sync.Mutex
	closed   bool
	owners   map[*host.Owner]*ownerState
	inflight sync.WaitGroup
	stats    counters
	saved    savedAccount // the bytes of every owner's saved outputs
	// instances lists the host's plugin instances: where the terminal
	// tools that take handed-over commands are found.
	instances func() []host.Instance
	// keeping: the host keeps shells past dsh (host.WithKeeping), so an
	// owner's first call takes back the shell a keeper kept for its id.
	keeping bool
}

// ownerState is what the tool keeps per owner. Fields after queue are used
// only by the call holding the queue.
type ownerState struct {
	owner  *host.Owner
	remove func() // the owner-close hook
	queue  fifo

	shellID string // "" when the owner has no shell
	// proven: the shell's backend proves a wait for input
	// (Capabilities.InputProof); without it silence is taken for one.
	proven bool
	// copyFiles: the shell does not read this machine's files, and its
	// backend writes files where it does (Capabilities.Files without
	// HostFiles): saved outputs are copied there.
	copyFiles bool
	// copies are the saved outputs copied where the shell runs, by name,
	// with the shell they were copied for; used by the owner's calls only.
	copies map[string]string
	// adopted: the owner asked the terminals service for a kept shell
	// already (plugin.keeping); only its first shell can be one.
	adopted bool
	// listed is shellID for the invariants, and retired the shells the
	// owner had before; both guarded by plugin.mu.
	listed  string
	retired map[string]bool
	// closing is closed once the shell a timeout reset in the background
	// is gone; nil when there is none.
	closing chan struct{}
	// handedOver is the command handed over as a terminal, while the
	// shell runs it; nil otherwise.
	handedOver terminal.Adopted
	// parked is the command waiting for a secret whose question went to
	// the client with a call's result; nil otherwise.
	parked  *parked
	outDir  string   // created on first use, for full outputs
	outRoot *os.Root // outDir, held open: files are made in it, not by name
	outSeq  int
	saved   ownerSaved // the owner's part of plugin.saved, under its lock
	// notes are what the owner's next result starts with: the reports of
	// cancelled calls.
	notes []string
}

// awaitClosed waits until the shell a timeout left closing is gone, so a
// call never runs beside it (it may hold files, ports or locks the command
// needs) and never sees its output.
func (st *ownerState) awaitClosed(ctx context.Context) error {
	if st.closing == nil {
		return nil
	}
	select {
	case <-st.closing:
		st.closing = nil
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// apply returns the instance, which the host closes once the tool is
// unregistered (see Close), checks (Invariants) and measures (Collect).
func apply(pctx *host.Context, cfg *Config) (any, error) {
	terms, err := host.Service[*terminal.Service](pctx, terminal.ServiceKey)
	if err != nil {
		return nil, err
	}
	p := &plugin{
		cfg:      cfg,
		terms:    terms,
		lifetime: pctx.Lifetime(),
		logger:   pctx.Logger(),
		owners:   make(map[*host.Owner]*ownerState),
		saved:    savedAccount{limit: cfg.MaxSavedBytesTotal, ownerLimit: cfg.MaxSavedBytesPerOwner},
	}
	p.instances = pctx.Instances
	_, p.keeping = pctx.Keeping()
	tool, err := host.NewTool(ToolName, cfg.Description, p.call)
	if err != nil {
		return p, err
	}
	tool.Instructions = cfg.instructions()
	// Backends register after this plugin starts, as their entries do, so
	// the backend this tool needs is looked up once all have started.
	pctx.CheckLoaded(func(context.Context) error {
		types := terms.Backends()
		if slices.Contains(types, cfg.BackendType) {
			return nil
		}
		have := "none is registered"
		if len(types) > 0 {
			have = "registered: " + strings.Join(types, ", ")
		}
		return config.FieldErrorf("backendType", "backendType %q: no backend of that type in its terminals service (%s); a typo, or no entry that registers it", cfg.BackendType, have)
	})
	return p, host.AddTool(pctx, tool)
}

// ownerState returns (creating on first use) the state of owner.
func (p *plugin) ownerState(owner *host.Owner) (*ownerState, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errUnloaded
	}
	if st, ok := p.owners[owner]; ok {
		return st, nil
	}
	st := &ownerState{owner: owner}
	remove, err := owner.Defer(func(ctx context.Context) error {
		p.mu.Lock()
		delete(p.owners, owner)
		p.mu.Unlock()
		// The terminals service closes the owner's sessions itself (its hook
		// runs first), which ends a call still running; wait for it before
		// touching the state it uses.
		if err := st.queue.acquire(ctx); err != nil {
			return fmt.Errorf("owner %q: waiting for its bash call: %w", owner.ID(), err)
		}
		defer st.queue.release()
		return st.removeOutputs(&p.saved)
	})
	if err != nil {
		return nil, err
	}
	st.remove = remove
	p.owners[owner] = st
	return st, nil
}

// Close runs when the plugin unloads, after the tool is unregistered:
// in-flight calls have seen the lifetime end; wait for them, then close
// every shell and remove every output directory.
func (p *plugin) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	owners := make([]*ownerState, 0, len(p.owners))
	for _, st := range p.owners {
		owners = append(owners, st)
	}
	p.owners = nil
	p.mu.Unlock()
	p.inflight.Wait()
	var errs []error
	for _, st := range owners {
		st.remove()
		if st.shellID != "" {
			if _, err := p.terms.Kill(ctx, st.owner, st.shellID, "tool-bash-persistent disposed"); err != nil && !errors.Is(err, termapi.ErrNoSession) {
				errs = append(errs, fmt.Errorf("close shell of owner %q: %w", st.owner.ID(), err))
			}
			st.shellID = ""
		}
		if err := st.removeOutputs(&p.saved); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// openOutputRoot opens the owner's directory of outputs, creating it in
// base. An empty base is the owner's directory in dsh's private directory
// (private.HoldOwnerDir), which a sandboxed shell of the owner still sees, so
// the model can read its saved outputs there; without an owner, dsh's
// private directory itself.
func (st *ownerState) openOutputRoot(base string) error {
	if base == "" {
		dir, err := private.Dir()
		if st.owner != nil && err == nil {
			// Held until the output directory in it is made: a shell of
			// the owner closing meanwhile, here or in another process,
			// would remove it while still empty.
			var release func()
			dir, release, err = private.HoldOwnerDir(st.owner.ID())
			if err == nil {
				defer release()
			}
		}
		if err != nil {
			return fmt.Errorf("create output directory: %w", err)
		}
		base = dir
	}
	dir, err := os.MkdirTemp(base, "dsh-output-")
	if err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		os.Remove(dir)
		return fmt.Errorf("open output directory: %w", err)
	}
	st.outDir, st.outRoot = dir, root
	return nil
}

// openOutput creates the file that receives one call's full output (see
// savedFile), at most maxBytes long. It is made through the directory held
// open, exclusively, so nothing put at its name beforehand is written to or
// trusted. A directory that has gone (a command's rm -rf) is replaced by a
// new one, and what its files were charged is given back to acct.
func (st *ownerState) openOutput(acct *savedAccount, base string, maxBytes int64) (*savedFile, string, error) {
	for attempt := 0; ; attempt++ {
		if st.outRoot == nil {
			if err := st.openOutputRoot(base); err != nil {
				return nil, "", err
			}
		}
		st.outSeq++
		name := fmt.Sprintf("output-%d.txt", st.outSeq)
		f, err := st.outRoot.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
		if err == nil {
			return newSavedFile(acct, st, st.outRoot, name, f, maxBytes), filepath.Join(st.outDir, name), nil
		}
		if !errors.Is(err, fs.ErrNotExist) || attempt > 0 {
			return nil, "", fmt.Errorf("create output file: %w", err)
		}
		st.outRoot.Close()
		st.outRoot, st.outDir = nil, ""
		acct.forget(st)
	}
}

func (st *ownerState) removeOutputs(acct *savedAccount) error {
	acct.forget(st)
	if st.owner != nil {
		// Emptied below; the terminal backend may have made it too.
		defer private.RemoveOwnerDir(st.owner.ID())
	}
	if st.outDir == "" {
		return nil
	}
	dir := st.outDir
	st.outRoot.Close()
	st.outDir, st.outRoot = "", nil
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove output directory of owner %q: %w", st.owner.ID(), err)
	}
	return nil
}
