package terminalkubernetes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/dshdev/dsh/plugins/terminal-kubernetes/kubetest"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// startSleeping starts a command that prints a line and then sleeps, and
// returns its send once the line has come.
func startSleeping(t *testing.T, ctx context.Context, s termapi.Session) termapi.Send {
	t.Helper()
	send, err := s.Exec(ctx, termapi.ExecRequest{Command: "echo started; sleep 1000", Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	if line, err := send.Output(ctx); err != nil || line != "started\n" {
		t.Fatalf("output %q, %v", line, err)
	}
	return send
}

// waitSessionExit waits for send to settle as a shell exit, and returns
// why the shell was lost.
func waitSessionExit(t *testing.T, ctx context.Context, send termapi.Send) string {
	t.Helper()
	res, err := send.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != termapi.WaitSessionExit || !res.Status.Exited {
		t.Fatalf("settled %s with %v, want session_exit", res.Reason, res.Status)
	}
	return res.Status.Lost
}

// A pod evicted (the Eviction API, as a node drain does it) under a
// running command is a shell exit that says the pod was evicted, and the
// owner's next session gets a fresh pod.
func TestPodEvictedMidCommand(t *testing.T) {
	c := kubetest.Require(t)
	ns := c.Namespace(t)
	b := newBackend(t, testConfig(c, ns))
	s := spawn(t, b, "owner-e")
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	send := startSleeping(t, ctx, s)
	pods := c.Pods(t, ns, labelOwner+"=owner-e")
	if len(pods) != 1 {
		t.Fatalf("%d pods of owner-e, want 1", len(pods))
	}
	// A finalizer keeps the pod's object while the pod ends, as a grace
	// period would for a while: the test does not race the kubelet's
	// removal of it. Once gone, a pod is only "deleted".
	keep := `{"metadata":{"finalizers":["dsh.dev/test"]}}`
	if _, err := c.Admin.CoreV1().Pods(ns).Patch(ctx, pods[0].Name, types.MergePatchType, []byte(keep), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		release := `{"metadata":{"finalizers":null}}`
		if _, err := c.Admin.CoreV1().Pods(ns).Patch(ctx, pods[0].Name, types.MergePatchType, []byte(release), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("release the pod: %v", err)
		}
	})
	eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pods[0].Name, Namespace: ns}}
	if err := c.Admin.PolicyV1().Evictions(ns).Evict(ctx, eviction); err != nil {
		t.Fatal(err)
	}
	lost := waitSessionExit(t, ctx, send)
	if !strings.Contains(lost, pods[0].Name+" was evicted: EvictionByEvictionAPI") {
		t.Errorf("the exit says %q, want it to say that pod %s was evicted", lost, pods[0].Name)
	}
	if _, err := s.Exec(ctx, termapi.ExecRequest{Command: "true"}); !errors.Is(err, termapi.ErrSessionExited) {
		t.Errorf("exec after the eviction: %v, want ErrSessionExited", err)
	}
	s.Close(ctx, "test")
	again := spawn(t, b, "owner-e")
	if out := mustComplete(t, again, "echo $HOSTNAME", 0); out == pods[0].Name+"\n" {
		t.Errorf("the next session runs in the evicted pod %s", pods[0].Name)
	}
}

// With workspaceClaim, each owner's workspace is its own directory on the
// claim, kept across its pods: what one pod wrote, the owner's next pod
// reads, and another owner does not see it. The claim is bound by the
// cluster's persistent volume controller to a hostPath volume the test
// makes.
func TestWorkspaceClaim(t *testing.T) {
	c := kubetest.Require(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	dir := t.TempDir()
	// The pods' user writes there (hostPath has no fsGroup).
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-workspaces"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "dsh-test-manual",
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
		},
	}
	if _, err := c.Admin.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		if err := c.Admin.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete the volume: %v", err)
		}
	})
	class := "dsh-test-manual"
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "workspaces"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			VolumeName:       pv.Name,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := c.Admin.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitClaimBound(t, ctx, c, ns, claim.Name)

	cfg := testConfig(c, ns)
	cfg.WorkspaceClaim = claim.Name
	b := newBackend(t, cfg)
	first := spawn(t, b, "owner-w")
	if out := mustComplete(t, first, "pwd; echo kept > note; echo $HOSTNAME", 0); !strings.HasPrefix(out, "/workspace\n") {
		t.Fatalf("the first pod: %q", out)
	}
	if err := first.Close(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	if pods := c.Pods(t, ns, labelOwner+"=owner-w"); len(pods) != 0 {
		t.Fatalf("%d pods of owner-w after close, want 0", len(pods))
	}
	next := spawn(t, b, "owner-w")
	if out := mustComplete(t, next, "cat note", 0); out != "kept\n" {
		t.Errorf("the owner's next pod reads %q, want what the first wrote", out)
	}
	other := spawn(t, b, "owner-x")
	if out := mustComplete(t, other, "ls -A", 0); out != "" {
		t.Errorf("another owner's workspace holds %q, want it empty", out)
	}
	// On the volume, each owner has a directory of its own.
	data, err := os.ReadFile(filepath.Join(dir, "owner-w", "note"))
	if err != nil || string(data) != "kept\n" {
		t.Errorf("the volume's owner-w/note: %q, %v", data, err)
	}
}

// waitClaimBound waits until the persistent volume controller has bound
// the claim.
func waitClaimBound(t *testing.T, ctx context.Context, c *kubetest.Cluster, ns, name string) {
	t.Helper()
	w, err := c.Admin.CoreV1().PersistentVolumeClaims(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if pvc, ok := ev.Object.(*corev1.PersistentVolumeClaim); ok && pvc.Status.Phase == corev1.ClaimBound {
			return
		}
	}
	t.Fatalf("claim %s/%s was not bound: %v", ns, name, context.Cause(ctx))
}

// With parent, every created pod has an owner reference to it, and the
// cluster's garbage collector deletes the pods with the parent: the
// session running there ends as a shell exit.
func TestParentOwnsPods(t *testing.T) {
	c := kubetest.Require(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	parent, err := c.Admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dsh-parent"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(c, ns)
	cfg.Parent = &ParentRef{APIVersion: "v1", Kind: "ConfigMap", Name: parent.Name, UID: string(parent.UID)}
	b := newBackend(t, cfg)
	s := spawn(t, b, "owner-p")
	pods := c.Pods(t, ns, labelOwner+"=owner-p")
	if len(pods) != 1 {
		t.Fatalf("%d pods of owner-p, want 1", len(pods))
	}
	refs := pods[0].OwnerReferences
	if len(refs) != 1 || refs[0].UID != parent.UID || refs[0].Kind != "ConfigMap" || refs[0].Name != parent.Name {
		t.Fatalf("the pod's owner references: %+v, want the config map %s", refs, parent.UID)
	}
	send := startSleeping(t, ctx, s)
	w, err := c.Admin.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", pods[0].Name).String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	background := metav1.DeletePropagationBackground
	if err := c.Admin.CoreV1().ConfigMaps(ns).Delete(ctx, parent.Name, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
		t.Fatal(err)
	}
	for ev := range w.ResultChan() {
		if ev.Type == watch.Deleted {
			break
		}
	}
	if lost := waitSessionExit(t, ctx, send); !strings.Contains(lost, pods[0].Name) {
		t.Errorf("the exit says %q, want it to name the pod %s", lost, pods[0].Name)
	}
	if pods := c.Pods(t, ns, labelOwner+"=owner-p"); len(pods) != 0 {
		t.Errorf("%d pods of owner-p after its parent was deleted, want 0", len(pods))
	}
}

// With the helper in the shell's image (helperPath, no helperImage), the
// pod has no init container, and the helper serves as with one: the stdin
// proof, the signals the terminal has no character for.
func TestHelperInImage(t *testing.T) {
	c := kubetest.Require(t)
	ns := c.Namespace(t)
	cfg := testConfig(c, ns)
	cfg.HelperImage = ""
	cfg.HelperPath = helperInTestImage
	b := newBackend(t, cfg)
	s := spawn(t, b, "owner-i")
	if !s.Capabilities().InputProof {
		t.Error("no stdin proof with the helper in the image")
	}
	pods := c.Pods(t, ns, labelOwner+"=owner-i")
	if len(pods) != 1 || len(pods[0].Spec.InitContainers) != 0 {
		t.Fatalf("pods of owner-i: %d, want one without init containers", len(pods))
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	send := startSleeping(t, ctx, s)
	if _, err := s.Signal(ctx, termapi.SIGTERM); err != nil {
		t.Fatal(err)
	}
	res, err := send.Wait(ctx)
	if err != nil || res.Exec == nil || res.Exec.State != termapi.ExecCompleted || res.Exec.ExitCode != 143 {
		t.Errorf("the command after SIGTERM: %+v, %v; want it completed with code 143", res, err)
	}
}
