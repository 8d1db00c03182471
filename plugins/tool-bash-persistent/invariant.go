package bashtool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/invariant"
	"github.com/dshdev/dsh/plugins/terminal"
)

// invariantPackage names this package's invariants.
const invariantPackage = "github.com/dshdev/dsh/plugins/tool-bash-persistent"

func init() {
	host.Register(host.Plugin{
		Name:    PluginName + invariant.CompanionSuffix,
		Summary: "runtime invariants of the bash tool: of every instance this process runs",
		Inject:  []host.Key{invariant.ServiceKey},
		Apply: func(pctx *host.Context, _ any) error {
			return invariant.Install(pctx, invariantPackage, Invariants()...)
		},
	})
}

// liveTools are the loaded instances of the tool in this process.
var liveTools sync.Map // *plugin → struct{}

// Invariants are the tool's runtime invariants, over every loaded instance
// (the tool-bash-persistent-invariant plugin installs them).
func Invariants() []invariant.Check {
	return []invariant.Check{
		{Name: "cached-shells-are-listed", Run: func(context.Context) error {
			return eachOwner(func(p *plugin, owner *host.Owner, shell string) error {
				if shell == "" || !owner.Live() {
					return nil
				}
				if !slices.ContainsFunc(p.terms.List(owner), func(i terminal.SessionInfo) bool { return i.ID == shell }) {
					return fmt.Errorf("owner %q: the tool holds shell %s, which the terminals service does not list", owner.ID(), shell)
				}
				return nil
			})
		}},
		{Name: "retired-shells-stay-retired", Run: func(context.Context) error {
			// A shell the tool let go (a reset, an exit) never becomes the
			// owner's again: a call would run in a shell the model was
			// told was reset.
			return eachOwner(func(p *plugin, owner *host.Owner, shell string) error {
				p.mu.Lock()
				again := shell != "" && p.owners[owner] != nil && p.owners[owner].retired[shell]
				p.mu.Unlock()
				if again {
					return fmt.Errorf("owner %q: shell %s was let go, and is the owner's shell again", owner.ID(), shell)
				}
				return nil
			})
		}},
	}
}

// eachOwner runs check on every owner of every loaded instance, with the
// shell the tool holds for it.
func eachOwner(check func(p *plugin, owner *host.Owner, shell string) error) error {
	var errs []error
	liveTools.Range(func(k, _ any) bool {
		p := k.(*plugin)
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
		for _, h := range owners {
			if err := check(p, h.owner, h.shell); err != nil {
				errs = append(errs, err)
			}
		}
		return true
	})
	return errors.Join(errs...)
}
