package main

import (
	"encoding/json"
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
	// The argument's description is its field's doc comment.
	out, err := exec.Command(bin, "tools", "--json", "-d", "deploy.yaml").Output()
	if err != nil {
		t.Fatalf("tools: %v", err)
	}
	var tools []struct {
		Name        string
		InputSchema struct {
			Properties map[string]struct{ Description string }
		}
	}
	if err := json.Unmarshal(out, &tools); err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools {
		if d := tool.InputSchema.Properties["text"].Description; tool.Name == "shout" && d != "Text is what to shout." {
			t.Errorf("shout's text argument is described %q, want its doc comment", d)
		}
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
