//go:build linux

package sandbox

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

func TestCheckReportsTheABI(t *testing.T) {
	r, err := Check(context.Background(), Policy{Mode: termapi.SandboxReadOnly, Network: false})
	if err != nil {
		if os.Getenv("DSH_REQUIRE_SANDBOX") == "1" {
			t.Fatalf("the sandbox is required here: %v", err)
		}
		t.Skipf("this machine cannot enforce the sandbox: %v", err)
	}
	if r.ABI < MinABI {
		t.Errorf("ABI %d, want at least %d", r.ABI, MinABI)
	}
}

func TestCheckNamesWhatFails(t *testing.T) {
	_, err := Check(context.Background(), Policy{Mode: termapi.SandboxWorkspaceWrite, Network: true, WritableDirs: []string{"/nonexistent-dsh-dir"}})
	if !errors.Is(err, ErrUnenforceable) {
		t.Fatalf("got %v, want ErrUnenforceable", err)
	}
	if !strings.Contains(err.Error(), "/nonexistent-dsh-dir") || strings.Contains(err.Error(), helperPrefix) {
		t.Errorf("error %q should name the path, once, without the helper's prefix", err)
	}
}

func TestWrapLeavesAnUnconfinedCommandAlone(t *testing.T) {
	cmd := exec.Command("/bin/true")
	if err := Wrap(cmd, Policy{Mode: termapi.SandboxFullAccess, Network: true}); err != nil {
		t.Fatal(err)
	}
	if cmd.Path != "/bin/true" || len(cmd.Args) != 1 || cmd.SysProcAttr != nil {
		t.Errorf("command changed: %q %q %+v", cmd.Path, cmd.Args, cmd.SysProcAttr)
	}
}

func TestHelperRefusesABadPolicy(t *testing.T) {
	cmd := exec.Command(self)
	cmd.Args = []string{HelperName, "{not json", "/bin/true", "true"}
	out, err := cmd.CombinedOutput()
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != exitHelperFailed {
		t.Fatalf("helper: %v, want exit %d", err, exitHelperFailed)
	}
	if !strings.HasPrefix(string(out), helperPrefix+"decode policy:") {
		t.Errorf("helper said %q", out)
	}
}

// Writable directories may repeat or nest (writable: [/tmp] with a
// workspace below /tmp): each is writable, once.
func TestCheckTakesNestedWritableDirectories(t *testing.T) {
	outer := t.TempDir()
	inner := filepath.Join(outer, "inner")
	if err := os.Mkdir(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Check(context.Background(), Policy{Mode: termapi.SandboxWorkspaceWrite, Network: true, WritableDirs: []string{inner, outer, outer}}); err != nil {
		if os.Getenv("DSH_REQUIRE_SANDBOX") != "1" && errors.Is(err, ErrUnenforceable) && !strings.Contains(err.Error(), "writable") {
			t.Skipf("this machine cannot enforce the sandbox: %v", err)
		}
		t.Fatal(err)
	}
}
