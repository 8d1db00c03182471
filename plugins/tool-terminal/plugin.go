package terminaltool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// PluginName is the plugin's registered name.
const PluginName = "tool-terminal"

func init() {
	host.Register(host.Plugin{
		Name:    PluginName,
		Summary: "interactive terminals for the agent: terminal_open, terminal_send, terminal_read, terminal_signal, terminal_close, terminal_list",
		Inject:  []host.Key{host.ToolsKey, terminal.ServiceKey},
		Config:  func() any { return DefaultConfig() },
		Apply:   host.Typed(apply),
	})
}

// plugin is one loaded instance of the tools.
type plugin struct {
	cfg      *Config
	terms    *terminal.Service
	lifetime context.Context
	logger   *slog.Logger

	mu     sync.Mutex
	closed bool
	owners map[*host.Owner]*ownerTerms
	open   int // terminals whose command runs, all owners
}

// ownerTerms are one owner's terminals, in the order they were made.
type ownerTerms struct {
	owner  *host.Owner
	remove func()
	terms  []*term
}

// keptEnded bounds the terminals of one owner whose command ended that
// stay readable until closed; older ones are dropped.
const keptEnded = 16

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
		owners:   make(map[*host.Owner]*ownerTerms),
	}
	tools, err := p.tools()
	if err != nil {
		return p, err
	}
	for _, tool := range tools {
		if err := host.AddTool(pctx, tool); err != nil {
			return p, err
		}
	}
	return p, nil
}

var (
	errUnloaded   = errors.New("tool-terminal was unloaded")
	errNoSuchTerm = errors.New("no such terminal")
)

// ownerLocked returns owner's terminals, creating the record and its
// cleanup on first use.
func (p *plugin) ownerLocked(owner *host.Owner) (*ownerTerms, error) {
	if p.closed {
		return nil, errUnloaded
	}
	if ot := p.owners[owner]; ot != nil {
		return ot, nil
	}
	ot := &ownerTerms{owner: owner}
	remove, err := owner.Defer(func(ctx context.Context) error {
		p.mu.Lock()
		if p.owners[owner] == ot {
			delete(p.owners, owner)
		}
		terms := slices.Clone(ot.terms)
		ot.terms = nil
		p.mu.Unlock()
		return closeAll(ctx, terms)
	})
	if err != nil {
		return nil, err
	}
	ot.remove = remove
	p.owners[owner] = ot
	return ot, nil
}

func closeAll(ctx context.Context, terms []*term) error {
	var errs []error
	for _, t := range terms {
		if err := t.close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("terminal %s: %w", t.id, err))
		}
	}
	return errors.Join(errs...)
}

// reserve counts a new terminal of ot against the limits, or says which
// limit it would pass.
func (p *plugin) reserve(ot *ownerTerms) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errUnloaded
	}
	mine := 0
	for _, t := range ot.terms {
		if t.running() {
			mine++
		}
	}
	switch {
	case mine >= p.cfg.MaxPerOwner:
		return fmt.Errorf("you have %d terminals open, the most one agent may have (maxPerOwner); close one with terminal_close first", mine)
	case p.open >= p.cfg.MaxTotal:
		return fmt.Errorf("dsh has %d terminals open, the most it allows at once (maxTotal); close one of yours with terminal_close, or try again later", p.open)
	}
	p.open++
	return nil
}

// unreserve gives back a reservation whose terminal never started.
func (p *plugin) unreserve() {
	p.mu.Lock()
	p.open--
	p.mu.Unlock()
}

// add records t for its owner, dropping the oldest ended terminals past
// keptEnded.
func (p *plugin) add(ot *ownerTerms, t *term) {
	p.mu.Lock()
	ot.terms = append(ot.terms, t)
	var drop []*term
	ended := 0
	for i := len(ot.terms) - 1; i >= 0; i-- {
		if !ot.terms[i].running() {
			if ended++; ended > keptEnded {
				drop = append(drop, ot.terms[i])
			}
		}
	}
	ot.terms = slices.DeleteFunc(ot.terms, func(x *term) bool { return slices.Contains(drop, x) })
	p.mu.Unlock()
	for _, d := range drop {
		_ = d.close(context.Background())
	}
}

// forgetOpen takes t off the count of running terminals, once.
func (p *plugin) forgetOpen(t *term) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !t.counted {
		return
	}
	t.counted = false
	p.open--
}

// find returns owner's terminal id.
func (p *plugin) find(owner *host.Owner, id string) (*term, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errUnloaded
	}
	if ot := p.owners[owner]; ot != nil {
		for _, t := range ot.terms {
			if t.id == id {
				return t, nil
			}
		}
	}
	return nil, fmt.Errorf("%w %q; terminal_list shows yours", errNoSuchTerm, id)
}

// remove drops t from its owner's terminals.
func (p *plugin) remove(t *term) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ot := p.owners[t.owner]; ot != nil {
		ot.terms = slices.DeleteFunc(ot.terms, func(x *term) bool { return x == t })
	}
}

// list returns owner's terminals.
func (p *plugin) list(owner *host.Owner) []*term {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ot := p.owners[owner]; ot != nil {
		return slices.Clone(ot.terms)
	}
	return nil
}

// Close runs when the plugin unloads: every terminal is closed.
func (p *plugin) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	var terms []*term
	for _, ot := range p.owners {
		ot.remove()
		terms = append(terms, ot.terms...)
	}
	p.owners = nil
	p.mu.Unlock()
	return closeAll(ctx, terms)
}

// Adopt takes a command that another tool handed over (the bash tool's
// onInput: handoff) as a terminal of owner. It counts against the limits
// like a terminal opened here.
func (p *plugin) Adopt(ctx context.Context, owner *host.Owner, h terminal.Handoff) (terminal.Adopted, error) {
	p.mu.Lock()
	ot, err := p.ownerLocked(owner)
	p.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := p.reserve(ot); err != nil {
		return nil, err
	}
	size := p.terms.Policy(owner).Size
	for _, info := range p.terms.List(owner) {
		if info.ID == h.SessionID && info.Capabilities.Resize {
			// The emulator must have the terminal's size; the shell's own
			// is the backend's, which is not known here: set it.
			size = size.Or(termapi.DefaultSize)
			if err := p.terms.Resize(ctx, owner, h.SessionID, size); err != nil {
				size = termapi.Size{}
			}
		}
	}
	t := newTerm(p, owner, h.SessionID, h.Command, size.Or(termapi.DefaultSize), true)
	t.counted = true
	// What the terminal showed before is the handing tool's: feed it for
	// the screen's state, then start the lines afresh.
	t.rawEnd = h.RawEnd
	t.startPump(0)
	t.mu.Lock()
	for t.pos < t.rawEnd && !t.pumped {
		if !t.waitLocked(ctx, nil) {
			break
		}
	}
	t.scr.Lines()
	t.waiting, t.input = true, termapi.InputUnknown
	t.mu.Unlock()
	p.add(ot, t)
	return t, nil
}

// ID is the terminal's id (terminal.Adopted).
func (t *term) ID() string { return t.id }

// Done is closed once an adopted terminal's command ended and its session
// went back to its tool (terminal.Adopted).
func (t *term) Done() <-chan struct{} { return t.released }

// Release reports whether the adopted command has ended and its session
// gone back to its tool, finding out first (terminal.Adopted).
func (t *term) Release(ctx context.Context) bool {
	t.refresh(ctx)
	select {
	case <-t.released:
		return true
	default:
		return false
	}
}

// running reports whether the terminal's command still runs here.
func (t *term) running() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.letGo
}

// Interface guards.
var (
	_ terminal.Adopter = (*plugin)(nil)
	_ terminal.Adopted = (*term)(nil)
)
