//go:build linux

package bashtool_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

var fullOutputLine = regexp.MustCompile(`\[full output: (\S+)\]$`)

// A confined shell sees nothing of dsh's private directory but its own
// parts: its owner's saved outputs stay readable through the tool, which
// is how the model reads what was clipped (issue 25, item 4).
func TestSandboxedShellReadsItsSavedOutput(t *testing.T) {
	if os.Getenv(externalBackendConfig) != "" {
		t.Skip("the backend under test is configured for another sandbox")
	}
	for _, mode := range []string{"read-only", "workspace-write"} {
		t.Run(mode, func(t *testing.T) {
			hs := newHarness(t, "{maxOutputChars: 200}", "{sandbox: {mode: "+mode+", network: false}}")
			o := hs.owner(t, "agent-"+strings.ReplaceAll(mode, "-", ""))
			got := hs.run(t, o, "seq 1 1000")
			m := fullOutputLine.FindStringSubmatch(got)
			if m == nil {
				t.Fatalf("no saved output in %q", got)
			}
			if got := hs.run(t, o, "tail -n 1 "+m[1]); got != "1000" {
				t.Errorf("reading the saved output from the sandbox: %q", got)
			}
		})
	}
}
