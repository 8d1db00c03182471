// Package standard links the plugins that ship with dsh into a binary: import
// it for its side effects (each plugin registers itself in init). A custom
// binary can import a different set.
package standard

import (
	_ "github.com/dshdev/dsh/plugins/terminal"             // service "terminals"
	_ "github.com/dshdev/dsh/plugins/terminal-bash"        // backend type "shell"
	_ "github.com/dshdev/dsh/plugins/tool-bash-persistent" // tool "bash"
)
