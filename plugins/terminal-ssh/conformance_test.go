package terminalssh

import (
	"strconv"
	"testing"
	"time"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
	"github.com/dshdev/dsh/plugins/terminal/terminaltest"
)

// TestConformance runs the terminals contract against sessions on the
// shared server. `read line` blocks the shell itself reading the terminal:
// the probe beside the shell proves it from the remote /proc, and ^C
// reaches it at any moment, so the interrupt checks are exact. The silence
// bound is far above the time a quick command takes.
func TestConformance(t *testing.T) {
	terminaltest.CheckGoroutines(t)
	terminaltest.TestBackend(t, func(t *testing.T) termapi.Backend {
		cfg := testConfig()
		cfg.IdleSilenceMs = 2000
		return newBackend(t, cfg)
	}, terminaltest.Options{
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
		Timeout:         2 * time.Minute,
	})
}
