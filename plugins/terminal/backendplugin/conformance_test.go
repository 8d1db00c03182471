package backendplugin_test

import (
	"strconv"
	"testing"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
	"github.com/dshdev/dsh/plugins/terminal/terminaltest"
)

// TestConformance runs the kit against the shell backend out of process:
// what passes in process passes through the plugin protocol.
func TestConformance(t *testing.T) {
	terminaltest.CheckGoroutines(t)
	terminaltest.TestBackend(t, func(t *testing.T) termapi.Backend {
		return open(t, `{"idleSilenceMs": 600000, "disposeGraceMs": 500}`)
	}, terminaltest.Options{
		EchoCommand:     func(text string) string { return "printf '%s\\n' " + strconv.Quote(text) },
		ReadCommand:     "read line",
		ProvesStdinWait: true,
		ExitCommand:     "exit 3",
		StatusCommand:   func(code int) string { return "(exit " + strconv.Itoa(code) + ")" },
		SizeCommand:     "stty size",
		CatCommand:      func(path string) string { return "cat -- '" + path + "'" },
	})
}

// TestKeeperConformance runs the kit against the shell backend in a
// keeper: a kept session behaves as any other while its host holds it.
func TestKeeperConformance(t *testing.T) {
	terminaltest.CheckGoroutines(t)
	terminaltest.TestBackend(t, func(t *testing.T) termapi.Backend {
		opts := keeperOptions(t, keeperDir(t))
		opts.Config = []byte(`{"idleSilenceMs": 600000, "disposeGraceMs": 500}`)
		return openKeeper(t, opts)
	}, terminaltest.Options{
		EchoCommand:     func(text string) string { return "printf '%s\\n' " + strconv.Quote(text) },
		ReadCommand:     "read line",
		ProvesStdinWait: true,
		ExitCommand:     "exit 3",
		StatusCommand:   func(code int) string { return "(exit " + strconv.Itoa(code) + ")" },
		SizeCommand:     "stty size",
	})
}
