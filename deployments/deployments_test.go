package deployments_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/moby/client"
	"go.yaml.in/yaml/v3"

	"github.com/dshdev/dsh/deployments"
	"github.com/dshdev/dsh/host"
	_ "github.com/dshdev/dsh/plugins/standard"
	terminalbash "github.com/dshdev/dsh/plugins/terminal-bash"
	"github.com/dshdev/dsh/plugins/terminal-docker/dockertest"
	"github.com/dshdev/dsh/plugins/terminal-kubernetes/kubetest"
)

// TestDefaultLoads starts and stops the embedded default deployment.
func TestDefaultLoads(t *testing.T) {
	d, err := host.ParseDeployment(deployments.DefaultName, deployments.Default, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Load(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	if tools := h.Tools().List(); len(tools) != 1 || tools[0].Name != "bash" {
		t.Errorf("default tools: %+v", tools)
	}
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// buildBackends builds the backend executables of cmd/ into bin/ of a
// fresh directory and returns the directory.
func buildBackends(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "bin")+"/", "../cmd/dsh-backend-bash", "../cmd/dsh-backend-ssh", "../cmd/dsh-backend-docker", "../cmd/dsh-backend-kubernetes")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the backends: %v\n%s", err, out)
	}
	return dir
}

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// TestReadmeExamplesLoad keeps the READMEs honest: every YAML example in
// them is a deployment that loads. An example that names a backend
// executable under ./bin/ loads from a directory where that executable has
// been built (one that needs a server elsewhere only resolves).
func TestReadmeExamplesLoad(t *testing.T) {
	binDir := ""
	for _, readme := range []string{"../README.md", "../README.zh.md"} {
		data, err := os.ReadFile(readme)
		if err != nil {
			t.Fatal(err)
		}
		blocks := yamlBlock.FindAllSubmatch(data, -1)
		if len(blocks) == 0 {
			t.Fatalf("%s has no YAML example", readme)
		}
		for _, b := range blocks {
			d, err := host.ParseDeployment(readme, b[1], func(string) (string, bool) { return "", false })
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(b[1], []byte("./bin/dsh-backend-")) {
				if binDir == "" {
					binDir = buildBackends(t)
				}
				d.File = filepath.Join(binDir, "deploy.yaml")
			}
			if bytes.Contains(b[1], []byte("./bin/dsh-backend-ssh")) || bytes.Contains(b[1], []byte("./bin/dsh-backend-docker")) ||
				bytes.Contains(b[1], []byte("./bin/dsh-backend-kubernetes")) {
				// Its example server, daemon or cluster is not there to connect to:
				// check that the deployment resolves, with the plugin in
				// place.
				if _, err := host.Resolve(d, nil); err != nil {
					t.Fatal(err)
				}
				continue
			}
			h, err := host.Load(context.Background(), d)
			if err != nil && errors.Is(err, terminalbash.ErrSandboxUnenforceable) && os.Getenv("DSH_REQUIRE_SANDBOX") != "1" {
				t.Logf("%s: a sandbox example not loaded, this machine cannot enforce it: %v", readme, err)
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestReadmesInStep checks that the two languages have the same outline:
// the same heading levels in the same order, the same code blocks, and in
// every section the same number of table rows and of list items, so a row
// or a bullet dropped from one is caught.
func TestReadmesInStep(t *testing.T) {
	type section struct{ rows, items int }
	outline := func(path string) (levels []string, code []string, sections []section) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		inCode := false
		sections = []section{{}}
		for line := range strings.SplitSeq(string(data), "\n") {
			if strings.HasPrefix(line, "```") {
				inCode = !inCode
				code = append(code, line)
				continue
			}
			switch cur := &sections[len(sections)-1]; {
			case inCode:
			case strings.HasPrefix(line, "#"):
				levels = append(levels, strings.Fields(line)[0])
				sections = append(sections, section{})
			case strings.HasPrefix(line, "|"):
				cur.rows++
			case strings.HasPrefix(strings.TrimLeft(line, " "), "- "), numbered.MatchString(line):
				cur.items++
			}
		}
		return levels, code, sections
	}
	enLevels, enCode, enSections := outline("../README.md")
	zhLevels, zhCode, zhSections := outline("../README.zh.md")
	if strings.Join(enLevels, " ") != strings.Join(zhLevels, " ") {
		t.Errorf("heading outlines differ:\n en %v\n zh %v", enLevels, zhLevels)
	}
	if strings.Join(enCode, " ") != strings.Join(zhCode, " ") {
		t.Errorf("code blocks differ:\n en %v\n zh %v", enCode, zhCode)
	}
	for i := range min(len(enSections), len(zhSections)) {
		if enSections[i] != zhSections[i] {
			t.Errorf("section %d (after heading %d): en has %d table rows and %d list items, zh %d and %d",
				i, i, enSections[i].rows, enSections[i].items, zhSections[i].rows, zhSections[i].items)
		}
	}
}

var numbered = regexp.MustCompile(`^\s*\d+\. `)

// TestSSHExampleResolves: deployments/ssh.yaml names its plugin as built
// next to the repository's deployments/ directory, and resolves.
func TestSSHExampleResolves(t *testing.T) {
	d, err := host.ReadDeployment("ssh.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	d.File = filepath.Join(buildBackends(t), "deployments", "ssh.yaml")
	plan, err := host.Resolve(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(plan.Steps); n != 3 {
		t.Errorf("ssh.yaml has %d entries, want 3", n)
	}
}

// TestSandboxedConfinesTheTool loads deployments/sandboxed.yaml and calls
// the bash tool in it: the workspace is writable, the rest of the machine
// and the network are not, and the shell keeps its state.
func TestSandboxedConfinesTheTool(t *testing.T) {
	ws := t.TempDir()
	env := map[string]string{"DSH_WORKSPACE": ws}
	d, err := host.ReadDeployment("sandboxed.yaml", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Load(context.Background(), d)
	if err != nil {
		if os.Getenv("DSH_REQUIRE_SANDBOX") != "1" && errors.Is(err, terminalbash.ErrSandboxUnenforceable) {
			t.Skipf("this machine cannot enforce the sandbox: %v", err)
		}
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	owner, err := h.NewOwner("agent", ws)
	if err != nil {
		t.Fatal(err)
	}
	call := func(command string) string {
		t.Helper()
		args, _ := json.Marshal(map[string]string{"command": command})
		res := h.Tools().Call(context.Background(), owner, "bash", args)
		if res.Err != nil {
			t.Fatalf("%s: %v", command, res.Err)
		}
		return res.Text
	}
	outside := t.TempDir()
	for _, tc := range []struct{ command, want string }{
		{"cd " + ws + " && echo kept > notes && export MARK=1 && echo written", "written"},
		{"cat notes; echo $MARK", "kept\n1"},
		// The read-only mounts refuse before Landlock does (EROFS).
		{"touch " + outside + "/x", "Read-only file system"},
		{"exec 3<>/dev/tcp/127.0.0.1/9 || echo refused", "refused"},
	} {
		if got := call(tc.command); !strings.Contains(got, tc.want) {
			t.Errorf("%s:\n%s\nwant it to contain %q", tc.command, got, tc.want)
		}
	}
}

// TestDockerExample loads deployments/docker.yaml, with its backend built
// beside it, against the tests' daemon and image, and calls the bash tool:
// the shell runs in a container, on the owner's workspace, without network.
func TestDockerExample(t *testing.T) {
	daemon := dockertest.Daemon(t)
	env := map[string]string{"DSH_DOCKER_HOST": daemon, "DSH_DOCKER_IMAGE": dockertest.Image}
	d, err := host.ReadDeployment("docker.yaml", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	d.File = filepath.Join(buildBackends(t), "deployments", "docker.yaml")
	h, err := host.Load(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	ws := t.TempDir()
	owner, err := h.NewOwner("agent", ws)
	if err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(map[string]string{"command": "pwd; echo from-the-container > note; tail -n +3 /proc/net/dev | cut -d: -f1"})
	res := h.Tools().Call(context.Background(), owner, "bash", args)
	if res.IsError || res.Text != "/workspace\n    lo" && res.Text != "/workspace\nlo" {
		t.Errorf("bash in the container: %q (error %v)", res.Text, res.IsError)
	}
	if data, err := os.ReadFile(filepath.Join(ws, "note")); err != nil || string(data) != "from-the-container\n" {
		t.Errorf("the workspace file: %q, %v", data, err)
	}
}

// TestDockerImageScriptAndDockerHost: scripts/docker-image.sh builds an
// image from this machine's binaries into the daemon DOCKER_HOST names,
// and deployments/docker.yaml, given only DOCKER_HOST and that image,
// runs the bash tool in a container from it.
func TestDockerImageScriptAndDockerHost(t *testing.T) {
	daemon := dockertest.Daemon(t)
	tag := "dsh-script-test:" + strconv.Itoa(os.Getpid())
	t.Setenv("DOCKER_HOST", daemon)
	script := exec.Command("bash", "../scripts/docker-image.sh", "-tag", tag)
	if out, err := script.CombinedOutput(); err != nil || !strings.Contains(string(out), "imported "+tag) {
		t.Fatalf("docker-image.sh: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		api, err := client.New(client.WithHost(daemon))
		if err == nil {
			api.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: true})
			api.Close()
		}
	})
	env := map[string]string{"DSH_DOCKER_IMAGE": tag} // and DOCKER_HOST, in the process
	d, err := host.ReadDeployment("docker.yaml", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	d.File = filepath.Join(buildBackends(t), "deployments", "docker.yaml")
	h, err := host.Load(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	owner, err := h.NewOwner("agent", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(map[string]string{"command": "pwd; ls /usr/bin/bash"})
	if res := h.Tools().Call(context.Background(), owner, "bash", args); res.IsError || res.Text != "/workspace\n/usr/bin/bash" {
		t.Errorf("bash in a container of the built image: %q (error %v)", res.Text, res.IsError)
	}
}

// TestInteractiveLoads loads deployments/interactive.yaml: bash and the
// six terminal tools, and a bash command waiting for input is handed over
// as a terminal.
func TestInteractiveLoads(t *testing.T) {
	d, err := host.ReadDeployment("interactive.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Load(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := h.Close(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	var names []string
	for _, tool := range h.Tools().List() {
		names = append(names, tool.Name)
	}
	want := "bash terminal_close terminal_list terminal_open terminal_read terminal_send terminal_signal"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("tools: %s, want %s", got, want)
	}
	owner, err := h.NewOwner("interactive", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(context.Background())
	res := h.Tools().Call(context.Background(), owner, "bash", json.RawMessage(`{"command":"read -p 'Name: ' n"}`))
	if res.IsError || !strings.Contains(res.Text, "handed over as terminal pty-") {
		t.Fatalf("bash result: %+v", res)
	}
}

// TestShippedTimeoutAction: every shipped deployment gives the bash tool
// the timeoutAction the README recommends (issue 27, item 7), written out
// with the variable that changes it.
func TestShippedTimeoutAction(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("We recommend `(\\w+)`").FindSubmatch(readme)
	if m == nil {
		t.Fatal("the README recommends no timeoutAction")
	}
	recommended := string(m[1])
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("shipped deployments: %v, %v", files, err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var entries []struct {
			Name   string         `yaml:"name"`
			Config map[string]any `yaml:"config"`
		}
		if err := yaml.Unmarshal(data, &entries); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, e := range entries {
			if e.Name != "tool-bash-persistent" {
				continue
			}
			if got, want := e.Config["timeoutAction"], "${DSH_BASH_TIMEOUT_ACTION:-"+recommended+"}"; got != want {
				t.Errorf("%s: timeoutAction %v, want %s", file, got, want)
			}
		}
	}
}

// TestKubernetesExample loads deployments/kubernetes.yaml, with its backend
// built beside it, against the test cluster (in a namespace where the
// backend's user has the rights of deployments/kubernetes/rbac.yaml), and
// calls the bash tool: the shell runs in a pod of the agent's own, which is
// gone once the agent's session ends.
func TestKubernetesExample(t *testing.T) {
	c := kubetest.Require(t)
	ns := c.Namespace(t)
	env := map[string]string{
		"DSH_KUBECONFIG": c.BackendKubeconfig, "DSH_KUBE_NAMESPACE": ns, "DSH_KUBE_IMAGE": c.Image,
		"DSH_KUBE_HELPER_IMAGE": c.HelperImage, "DSH_KUBE_NODE": c.Node,
	}
	d, err := host.ReadDeployment("kubernetes.yaml", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "bin")+"/", "../cmd/dsh-backend-kubernetes")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the backend: %v\n%s", err, out)
	}
	d.File = filepath.Join(dir, "deployments", "kubernetes.yaml")
	h, err := host.Load(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	owner, err := h.NewOwner("agent", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(map[string]string{"command": "pwd; id -u; echo $DSH_SESSION_ID"})
	res := h.Tools().Call(context.Background(), owner, "bash", args)
	if res.IsError || res.Text != "/workspace\n1000\nagent" {
		t.Errorf("bash in the pod: %q (error %v)", res.Text, res.IsError)
	}
	if pods := c.Pods(t, ns, "app.kubernetes.io/managed-by=dsh"); len(pods) != 1 {
		t.Errorf("%d pods while the agent works, want 1", len(pods))
	}
	if err := owner.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if pods := c.Pods(t, ns, "app.kubernetes.io/managed-by=dsh"); len(pods) != 0 {
		t.Errorf("%d pods after the agent's session ended, want 0", len(pods))
	}
}
