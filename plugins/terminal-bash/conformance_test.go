//go:build linux

package terminalbash

import (
	"strconv"
	"testing"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
	"github.com/dshdev/dsh/plugins/terminal/terminaltest"
)

func TestConformance(t *testing.T) {
	terminaltest.CheckGoroutines(t)
	terminaltest.TestBackend(t, func(t *testing.T) termapi.Backend {
		return newTestBackend(t, nil)
	}, conformanceOptions)
}

// TestConformanceSandboxed runs the kit against shells in the strictest
// sandbox: read-only, without network. Every proof (stdin waits, the
// process sweep, signals) must hold across the user namespace.
func TestConformanceSandboxed(t *testing.T) {
	requireSandbox(t)
	terminaltest.CheckGoroutines(t)
	terminaltest.TestBackend(t, func(t *testing.T) termapi.Backend {
		return newTestBackend(t, func(c *Config) { c.Sandbox = SandboxConfig{Mode: "read-only", Network: false} })
	}, conformanceOptions)
}

var conformanceOptions = terminaltest.Options{
	EchoCommand:     func(text string) string { return "printf '%s\\n' " + strconv.Quote(text) },
	ReadCommand:     "read line",
	AnswerCommand:   func(prefix string) string { return `read -r line; printf '%s\n' "` + prefix + `$line"` },
	LineCommand:     "stty sane 2>/dev/null; read line",
	SecretCommand:   "stty sane 2>/dev/null; read -s line",
	ProvesStdinWait: true,
	ExitCommand:     "exit 3",
	StatusCommand:   func(code int) string { return "(exit " + strconv.Itoa(code) + ")" },
	SizeCommand:     "stty size",
	CatCommand:      func(path string) string { return "cat -- '" + path + "'" },
}
