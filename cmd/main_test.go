//go:build linux

package dshcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshdev/dsh/config"
	"github.com/dshdev/dsh/host"
)

// clitestConfig is the config of the test-only plugin "clitest".
type clitestConfig struct {
	Greeting string `json:"greeting"`
	Repeat   int    `json:"repeat"`
}

func (c *clitestConfig) Validate() error {
	if c.Repeat < 1 {
		return config.FieldErrorf("repeat", "clitest: repeat must be a positive integer")
	}
	return nil
}

type greetArgs struct {
	Name string `json:"name"`
}

func init() {
	// Registered from a test file: part of the test binary only.
	host.Register(host.Plugin{
		Name:   "clitest",
		Inject: []host.Key{host.ToolsKey},
		Config: func() any { return &clitestConfig{Greeting: "hello", Repeat: 1} },
		Apply: host.Typed(func(pctx *host.Context, cfg *clitestConfig) (any, error) {
			tool, err := host.NewTool("greet", "Greet someone.", func(_ context.Context, o *host.Owner, a greetArgs) (string, error) {
				return strings.Repeat(cfg.Greeting+" "+a.Name+" from "+filepath.Base(o.Workdir())+"\n", cfg.Repeat), nil
			})
			if err != nil {
				return nil, err
			}
			return nil, host.AddTool(pctx, tool)
		}),
	})
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func writeFile(t testing.TB, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "deploy.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckDefault(t *testing.T) {
	code, out, errOut := runCLI(t, "check")
	if code != 0 || errOut != "" || !strings.HasPrefix(out, "deployment: default.yaml (embedded)\n") || !strings.HasSuffix(out, "ok\n") {
		t.Fatalf("code %d\nstdout %q\nstderr %q", code, out, errOut)
	}
}

// TestCheckConfig: check --config prints each entry's config as the
// plugin gets it: what the document says over the defaults.
func TestCheckConfig(t *testing.T) {
	path := writeFile(t, "- id: terminal\n  name: terminal\n- id: terminal-bash\n  name: terminal-bash\n- id: bash\n  name: tool-bash-persistent\n  config: {timeoutMs: 5000, timeoutAction: interrupt}\n")
	code, out, errOut := runCLI(t, "check", "--config", "-d", path)
	if code != 0 || errOut != "" {
		t.Fatalf("code %d, stderr %q", code, errOut)
	}
	var entries []struct {
		Entry  string         `json:"entry"`
		Plugin string         `json:"plugin"`
		Config map[string]any `json:"config"`
	}
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("%v in %q", err, out)
	}
	for _, e := range entries {
		if e.Entry == "bash" {
			if e.Config["timeoutMs"] != 5000.0 || e.Config["timeoutAction"] != "interrupt" || e.Config["maxOutputChars"] != 16000.0 {
				t.Fatalf("the bash entry's config: %v", e.Config)
			}
			return
		}
	}
	t.Fatalf("no bash entry in %q", out)
}

func TestBadDeploymentsExit2(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown plugin", "- id: x\n  name: nosuch\n", `:1: entry "x": unknown plugin "nosuch"`},
		{"unknown key", "- id: g\n  name: clitest\n  config:\n    greting: hi\n", `:4: entry "g" (clitest): unknown config key "greting" (known keys: greeting, repeat)`},
		{"wrong type", "- id: g\n  name: clitest\n  config:\n    repeat: often\n", `:4: entry "g" (clitest): repeat: expected an integer, got string "often"`},
		{"failed validation", "- id: g\n  name: clitest\n  config:\n    repeat: 0\n", `:4: entry "g" (clitest): repeat must be a positive integer`},
		{"malformed YAML", "- id: g\n  name: [clitest\n", `: malformed YAML: `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, tt.yaml)
			code, out, errOut := runCLI(t, "check", "--deployment", path)
			if code != 2 {
				t.Fatalf("exit %d, want 2 (stderr %q)", code, errOut)
			}
			if out != "" {
				t.Fatalf("stdout %q", out)
			}
			if !strings.HasPrefix(errOut, "dsh: "+path) || !strings.Contains(errOut, tt.want) ||
				strings.Count(errOut, "\n") != 1 || strings.Contains(errOut, "goroutine") {
				t.Fatalf("stderr %q lacks %q or is not one line", errOut, tt.want)
			}
		})
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"bogus"},
		{"check", "--no-such-flag"},
		{"call"},
		{"call", "greet", "{not json"},
		{"version", "extra"},
		{"--log-level", "loud", "check"},
		{"check", "--deployment", "/does/not/exist.yaml"},
	} {
		code, _, errOut := runCLI(t, args...)
		if code != 2 || !strings.HasPrefix(errOut, "dsh: ") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
		}
	}
}

func TestCheckAndCallWithPlugin(t *testing.T) {
	// The load order printed is the file's own, without the invariants.
	t.Setenv(checkInvariantsEnv, "0")
	path := writeFile(t, "- id: g\n  name: clitest\n  config:\n    greeting: ${GREETING:-hi}\n    repeat: 2\n")
	code, out, errOut := runCLI(t, "check", "-d", path)
	if code != 0 {
		t.Fatalf("check: %d %q", code, errOut)
	}
	for _, want := range []string{"load order:\n", "1.  g  (clitest)  injects tools ← host", "tools: greet\n"} {
		if !strings.Contains(out, want) {
			t.Fatalf("check output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runCLI(t, "tools", "-d", path, "--json")
	if code != 0 || !strings.Contains(out, `"name": "greet"`) || !strings.Contains(out, `"inputSchema"`) {
		t.Fatalf("tools: %d %s", code, out)
	}
	dir := t.TempDir()
	t.Setenv("GREETING", "hey")
	code, out, errOut = runCLI(t, "call", "-d", path, "-w", dir, "greet", `{"name":"bob"}`)
	want := strings.Repeat("hey bob from "+filepath.Base(dir)+"\n", 2)
	if code != 0 || out != want {
		t.Fatalf("call: exit %d stdout %q stderr %q", code, out, errOut)
	}
	code, out, _ = runCLI(t, "call", "-d", path, "greet", `{"nme":"bob"}`)
	if code != 2 || out != "invalid arguments: missing required property \"name\" (ignored unknown property \"nme\")\n" {
		t.Fatalf("bad arguments: exit %d stdout %q", code, out)
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := runCLI(t, "version")
	if code != 0 || !strings.HasPrefix(out, "dsh ") {
		t.Fatalf("version: %d %q", code, out)
	}
}

// TestNonLinuxBuildSaysWhy: building dsh for another OS fails with one
// sentence saying why, not a page of undefined names.
func TestNonLinuxBuildSaysWhy(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles")
	}
	cmd := exec.Command("go", "build", "-o", os.DevNull, "./dsh")
	cmd.Env = append(os.Environ(), "GOOS=darwin", "GOARCH=arm64")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatal("a darwin build succeeded")
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if !strings.Contains(string(out), "runs on Linux only") || len(lines) > 2 {
		t.Fatalf("darwin build output:\n%s", out)
	}
}

// TestVersionFromLinker: the -X instruction the comment on version gives
// sets what `dsh version` prints.
func TestVersionFromLinker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds dsh")
	}
	bin := filepath.Join(t.TempDir(), "dsh")
	build := exec.Command("go", "build", "-ldflags", "-X github.com/dshdev/dsh/cmd.version=v9.8.7-linker", "-o", bin, "./dsh")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "v9.8.7-linker") {
		t.Fatalf("dsh version = %q, %v; want the version the linker set", out, err)
	}
}
