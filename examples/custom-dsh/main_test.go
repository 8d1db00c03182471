package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The binary built from this package is a dsh that knows the shout tool
// and still has the bash tool.
func TestCustomDsh(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "custom-dsh")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, tc := range []struct{ tool, args, want string }{
		{"shout", `{"text":"hi"}`, "HI!!"},
		{"bash", `{"command":"echo from bash"}`, "from bash"},
	} {
		out, err := exec.Command(bin, "call", "-d", "deploy.yaml", tc.tool, tc.args).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != tc.want {
			t.Errorf("call %s: %q, %v; want %q", tc.tool, out, err, tc.want)
		}
	}
}
