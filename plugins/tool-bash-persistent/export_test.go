package bashtool

import "github.com/dshdev/dsh/host"

// KeepShellOnReset breaks the tool until restore is called: a reset closes
// the owner's shell and the tool goes on holding it.
func KeepShellOnReset() (restore func()) {
	testHookKeepShellOnReset.Store(true)
	return func() { testHookKeepShellOnReset.Store(false) }
}

// ReadoptRetiredShell makes owner's current shell one the tool let go
// before, as a broken reset would, in every instance of the tool h runs.
func ReadoptRetiredShell(h *host.Host, owner *host.Owner) {
	for _, inst := range h.Instances() {
		p, ok := inst.Value.(*plugin)
		if !ok {
			continue
		}
		p.mu.Lock()
		if st := p.owners[owner]; st != nil && st.listed != "" {
			if st.retired == nil {
				st.retired = make(map[string]bool)
			}
			st.retired[st.listed] = true
		}
		p.mu.Unlock()
	}
}
