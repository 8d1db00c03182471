package terminalkubernetes

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dshdev/dsh/plugins/terminal-kubernetes/kubetest"
)

// In an existing pod, named or selected, each session is an exec; closing
// it leaves the pod running. Without the helper, the shell still works.
func TestExistingPod(t *testing.T) {
	c := kubetest.Require(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "managed-elsewhere", Labels: map[string]string{"app": "sandbox"}},
		Spec: corev1.PodSpec{
			NodeName:                      c.Node,
			AutomountServiceAccountToken:  ptr(false),
			TerminationGracePeriodSeconds: ptr(int64(0)),
			Containers: []corev1.Container{{
				Name: "box", Image: c.Image, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/bin/bash", "--noprofile", "--norc"}, Stdin: true,
			}},
		},
	}
	if _, err := c.Admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitRunning(t, ns, "managed-elsewhere")
	for _, tc := range []struct {
		name string
		set  func(*Config)
	}{
		{"by name", func(cfg *Config) { cfg.Pod = "managed-elsewhere" }},
		{"by selector", func(cfg *Config) { cfg.PodSelector = "app=sandbox" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Kubeconfig = c.BackendKubeconfig
			cfg.Namespace = ns
			cfg.IdleSilenceMs = 600000
			cfg.Env = map[string]string{"FROM_CONFIG": "yes"}
			tc.set(cfg)
			b := newBackend(t, cfg)
			s := spawn(t, b, "owner-e")
			if out := mustComplete(t, s, "echo $HOSTNAME $FROM_CONFIG", 0); out != "managed-elsewhere yes\n" {
				t.Errorf("output %q", out)
			}
			if err := s.Close(ctx, "test"); err != nil {
				t.Fatal(err)
			}
			got, err := c.Admin.CoreV1().Pods(ns).Get(ctx, "managed-elsewhere", metav1.GetOptions{})
			if err != nil || got.DeletionTimestamp != nil || got.Status.Phase != corev1.PodRunning {
				t.Errorf("the existing pod after close: %v", err)
			}
		})
	}
}
