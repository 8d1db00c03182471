// Package standard links the plugins that ship with dsh into a binary: import
// it for its side effects (each plugin registers itself in init), and lets
// deployments load backend executables by path. A custom
// binary can import a different set.
package standard

import (
	"github.com/dshdev/dsh/plugins/terminal"

	_ "github.com/dshdev/dsh/plugins/invariant"            // service "invariants"
	_ "github.com/dshdev/dsh/plugins/terminal-bash/plugin" // backend type "shell"
	_ "github.com/dshdev/dsh/plugins/tool-bash-persistent" // tool "bash"
	_ "github.com/dshdev/dsh/plugins/tool-terminal"        // tools "terminal_*"
)

// The terminals service (plugin "terminal"), and entries whose name is a
// path start that executable as a backend plugin.
func init() { terminal.RegisterExternal() }
