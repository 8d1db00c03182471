package bashtool

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal"
)

// Invariants are the instance's runtime invariants (host.Checker).
func (p *plugin) Invariants() map[string]func(context.Context) error {
	return map[string]func(context.Context) error{
		"cached-shells-are-listed": func(context.Context) error {
			return p.eachOwner(func(owner *host.Owner, shell string) error {
				if shell == "" || !owner.Live() {
					return nil
				}
				if !slices.ContainsFunc(p.terms.List(owner), func(i terminal.SessionInfo) bool { return i.ID == shell }) {
					return fmt.Errorf("owner %q: the tool holds shell %s, which the terminals service does not list", owner.ID(), shell)
				}
				return nil
			})
		},
		"retired-shells-stay-retired": func(context.Context) error {
			// A shell the tool let go (a reset, an exit) never becomes the
			// owner's again: a call would run in a shell the model was
			// told was reset.
			return p.eachOwner(func(owner *host.Owner, shell string) error {
				p.mu.Lock()
				again := shell != "" && p.owners[owner] != nil && p.owners[owner].retired[shell]
				p.mu.Unlock()
				if again {
					return fmt.Errorf("owner %q: shell %s was let go, and is the owner's shell again", owner.ID(), shell)
				}
				return nil
			})
		},
	}
}

// eachOwner runs check on every owner of the instance, with the shell the
// tool holds for it.
func (p *plugin) eachOwner(check func(owner *host.Owner, shell string) error) error {
	p.mu.Lock()
	type held struct {
		owner *host.Owner
		shell string
	}
	owners := make([]held, 0, len(p.owners))
	for o, st := range p.owners {
		owners = append(owners, held{o, st.listed})
	}
	p.mu.Unlock()
	var errs []error
	for _, h := range owners {
		if err := check(h.owner, h.shell); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
