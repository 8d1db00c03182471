//go:build linux

package dshcmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshdev/dsh/plugins/terminal-kubernetes/kubetest"
)

// kubeDeployment lays out deployments/kubernetes.yaml as a user would run
// it: the file as it is, its backend built where it names it
// (../bin/dsh-backend-kubernetes), and the environment it reads pointing
// at the test cluster, in a namespace of the test's own where the
// backend's user has the rights of deployments/kubernetes/rbac.yaml.
func kubeDeployment(t *testing.T, c *kubetest.Cluster, ns string) (path string, env []string) {
	t.Helper()
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "bin", "dsh-backend-kubernetes"), "./dsh-backend-kubernetes")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the backend: %v\n%s", err, out)
	}
	doc, err := os.ReadFile("../deployments/kubernetes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, "deployments", "kubernetes.yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	env = []string{
		"DSH_KUBECONFIG=" + c.BackendKubeconfig, "DSH_KUBE_NAMESPACE=" + ns, "DSH_KUBE_IMAGE=" + c.Image,
		"DSH_KUBE_HELPER_IMAGE=" + c.HelperImage, "DSH_KUBE_NODE=" + c.Node, "DSH_KUBE_IDENTITY=" + ns,
	}
	return path, env
}

// kubeContract checks the bash tool's contract on a pod through cs: state
// across calls, exit codes, the workspace, the pod's user, and that the
// shell runs in a pod of the namespace that dsh labelled as its own.
func kubeContract(t *testing.T, c *kubetest.Cluster, ns string, cs *mcp.ClientSession) {
	t.Helper()
	cases := []struct{ command, want string }{
		{"pwd; id -u", "/workspace\n1000"},
		{"cd /tmp && export KEPT=yes", ""},
		{"echo $PWD $KEPT", "/tmp yes"},
		{"echo out; (exit 7)", "out\n[exit code: 7]"},
		{"false", "[exit code: 1]"},
	}
	for _, tc := range cases {
		if got, isErr := bash(t, cs, tc.command); got != tc.want || isErr {
			t.Errorf("%s: got %q (error %v), want %q", tc.command, got, isErr, tc.want)
		}
	}
	host, _ := bash(t, cs, "echo $HOSTNAME")
	pods := c.Pods(t, ns, "app.kubernetes.io/managed-by=dsh")
	if len(pods) != 1 || pods[0].Name != host {
		t.Errorf("the shell runs on %q; dsh's pods in the namespace: %d", host, len(pods))
	}
}

// deployments/kubernetes.yaml served by the real dsh binary over stdio: the
// contract holds in a pod of the agent's own, which is gone once the client
// has gone and dsh has exited.
func TestE2EKubernetesStdio(t *testing.T) {
	c := kubetest.Require(t)
	ns := c.Namespace(t)
	path, env := kubeDeployment(t, c, ns)
	cmd := exec.Command(dshBinary(t), "serve", "--deployment", path, "--workdir", t.TempDir())
	cmd.Env = append(os.Environ(), env...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	cs, err := newE2EClient().Connect(t.Context(), &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * deadline}, nil)
	if err != nil {
		t.Fatalf("connect: %v (stderr %q)", err, stderr.String())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("dsh stderr:\n%s", stderr.String())
		}
	})
	kubeContract(t, c, ns, cs)
	closeAndWait(t, cs, cmd)
	if pods := c.Pods(t, ns, "app.kubernetes.io/managed-by=dsh"); len(pods) != 0 {
		t.Errorf("%d pods after dsh exited, want 0", len(pods))
	}
}

// The same over HTTP: each MCP session is an agent with a pod of its own,
// and every pod is gone once dsh has stopped.
func TestE2EKubernetesHTTP(t *testing.T) {
	c := kubetest.Require(t)
	ns := c.Namespace(t)
	path, env := kubeDeployment(t, c, ns)
	tokenFile := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokenFile, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startHTTPEnv(t, env, "--token-file", tokenFile, "--deployment", path, "--workdir", t.TempDir())
	d.client.Transport = bearer{testToken, d.client.Transport}
	cs := d.connect(t)
	kubeContract(t, c, ns, cs)
	other := d.connect(t)
	if got, _ := bash(t, other, "echo ${KEPT:-fresh} $HOSTNAME"); !strings.HasPrefix(got, "fresh ") {
		t.Errorf("a second session: %q", got)
	}
	if pods := c.Pods(t, ns, "app.kubernetes.io/managed-by=dsh"); len(pods) != 2 {
		t.Errorf("%d pods for two sessions, want 2", len(pods))
	}
	cs.Close()
	other.Close()
	d.stop(t, os.Interrupt)
	if pods := c.Pods(t, ns, "app.kubernetes.io/managed-by=dsh"); len(pods) != 0 {
		t.Errorf("%d pods after dsh stopped, want 0", len(pods))
	}
}
