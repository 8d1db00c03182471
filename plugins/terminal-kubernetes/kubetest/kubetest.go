// Package kubetest gives tests the single-node cluster that
// scripts/kubernetes/cluster.sh starts (.ci/run starts one and sources its
// env file), and a namespace of their own in it where the backend's user
// has exactly the rights deployments/kubernetes.yaml grants.
package kubetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Cluster is the test cluster, as its env file describes it.
type Cluster struct {
	// AdminKubeconfig is a cluster admin's kubeconfig, for the tests'
	// own checks and set-up.
	AdminKubeconfig string
	// BackendKubeconfig is the kubeconfig of a user with no rights but
	// those a Namespace's RoleBinding gives it: the backend's.
	BackendKubeconfig string
	// BackendUser is that user's name.
	BackendUser string
	// Image has bash (this machine's), HelperImage the pod helper.
	Image, HelperImage string
	// Node is the node's name (the cluster has no scheduler: pods name
	// their node).
	Node string
	// Admin is a client as the cluster admin.
	Admin kubernetes.Interface
}

// The variables the cluster's env file sets.
const (
	envKubeconfig        = "DSH_TEST_KUBECONFIG"
	envBackendKubeconfig = "DSH_TEST_KUBE_BACKEND_KUBECONFIG"
	envBackendUser       = "DSH_TEST_KUBE_BACKEND_USER"
	envImage             = "DSH_TEST_KUBE_IMAGE"
	envHelperImage       = "DSH_TEST_KUBE_HELPER_IMAGE"
	envNode              = "DSH_TEST_KUBE_NODE"
	// EnvRequire turns a missing cluster into a failure (CI sets it).
	EnvRequire = "DSH_REQUIRE_KUBERNETES"
)

// Require returns the test cluster. Without one the test skips, saying
// how to get one, unless DSH_REQUIRE_KUBERNETES=1 makes that a failure.
func Require(t testing.TB) *Cluster {
	t.Helper()
	c := &Cluster{
		AdminKubeconfig:   os.Getenv(envKubeconfig),
		BackendKubeconfig: os.Getenv(envBackendKubeconfig),
		BackendUser:       os.Getenv(envBackendUser),
		Image:             os.Getenv(envImage),
		HelperImage:       os.Getenv(envHelperImage),
		Node:              os.Getenv(envNode),
	}
	if c.AdminKubeconfig == "" || c.BackendKubeconfig == "" || c.BackendUser == "" || c.Image == "" || c.HelperImage == "" || c.Node == "" {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("%s=1 but no test cluster is described: source the env file of scripts/kubernetes/cluster.sh up DIR", EnvRequire)
		}
		t.Skip("no Kubernetes cluster for the tests: run scripts/kubernetes/cluster.sh up DIR and source DIR/env (.ci/run does)")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.AdminKubeconfig)
	if err != nil {
		t.Fatalf("the admin kubeconfig: %v", err)
	}
	// The files read now: by path, client-go would watch them from
	// goroutines that outlive the test.
	if err := rest.LoadTLSFiles(cfg); err != nil {
		t.Fatalf("the admin kubeconfig's files: %v", err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatalf("the admin client: %v", err)
	}
	if c.Admin, err = kubernetes.NewForConfigAndClient(cfg, hc); err != nil {
		t.Fatalf("the admin client: %v", err)
	}
	// Its idle connections end with the test, not a while after: a
	// package whose TestMain finds every goroutine (cmd's) needs that.
	// (client-go's wrappers of the transport hide it from
	// http.Client.CloseIdleConnections.)
	t.Cleanup(func() { utilnet.CloseIdleConnectionsFor(hc.Transport) })
	return c
}

// BackendRules are the rights the backend needs in its namespace, as
// deployments/kubernetes.yaml grants them: its pods, execs into them, the
// events that explain a pod that does not start, and the leases by which
// a dsh's pods outlive it only briefly.
var BackendRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get", "list", "delete", "patch"}},
	{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"create", "get"}},
	{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list"}},
	{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create", "get", "list", "update", "delete"}},
}

// Namespace creates a namespace of the test's own where the backend's user
// has BackendRules, and deletes it at the test's end.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	buf := make([]byte, 4)
	rand.Read(buf)
	name := "dsh-test-" + hex.EncodeToString(buf)
	if _, err := c.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		zero := int64(0)
		// The pods at once (a test that failed may leave some), then the
		// namespace, which the controller manager empties of the rest.
		if err := c.Admin.CoreV1().Pods(name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
			t.Errorf("delete the pods of namespace %s: %v", name, err)
		}
		if err := c.Admin.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", name, err)
		}
	})
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "dsh-backend"}, Rules: BackendRules}
	if _, err := c.Admin.RbacV1().Roles(name).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the role: %v", err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "dsh-backend"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "dsh-backend"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: c.BackendUser}},
	}
	if _, err := c.Admin.RbacV1().RoleBindings(name).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the role binding: %v", err)
	}
	c.waitAllowed(ctx, t, name)
	return name
}

// waitAllowed returns once the API server's authorizer grants the
// backend's user the role in namespace: it learns of a new role binding
// from its informers, a moment after the binding is created, and a test
// that starts at once would be refused (TestWarmPods was, now and then).
func (c *Cluster) waitAllowed(ctx context.Context, t testing.TB, namespace string) {
	t.Helper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               c.BackendUser,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "list", Resource: "pods"},
	}}
	err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got, err := c.Admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.Allowed, nil
	})
	if err != nil {
		t.Fatalf("the role binding in namespace %s never took effect: %v", namespace, err)
	}
}

// Pods lists the pods of namespace whose labels match selector.
func (c *Cluster) Pods(t testing.TB, namespace, selector string) []corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := c.Admin.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatalf("list pods in %s: %v", namespace, err)
	}
	return list.Items
}

// String names the cluster in messages.
func (c *Cluster) String() string { return fmt.Sprintf("the test cluster (%s)", c.AdminKubeconfig) }

// WaitRunning waits until every container of pod name in namespace runs.
func (c *Cluster) WaitRunning(t testing.TB, namespace, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		pod, err := c.Admin.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil && pod.Status.Phase == corev1.PodRunning {
			running := true
			for _, cs := range pod.Status.ContainerStatuses {
				running = running && cs.State.Running != nil
			}
			if running {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pod %s/%s is not running: %v", namespace, name, err)
		case <-tick.C:
		}
	}
}
