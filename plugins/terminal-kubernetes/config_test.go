package terminalkubernetes

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// Bad configs are refused at load, naming the field.
func TestDecodeConfigErrors(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{`{}`, "set image or podTemplate"},
		{`{"image": "a", "pod": "b"}`, "exclude each other"},
		{`{"image": "a", "identity": "Not_A_Label"}`, "identity must be"},
		{`{"image": "a", "leaseSeconds": 1}`, "leaseSeconds must be between"},
		{`{"image": "a", "mountPath": "work"}`, "mountPath must be an absolute path"},
		{`{"image": "a", "memory": "lots"}`, "memory must be a quantity"},
		{`{"image": "a", "execTransport": "carrier-pigeon"}`, "execTransport must be"},
		{`{"image": "a", "warmPods": 2, "workspaceClaim": "c"}`, "warmPods and workspaceClaim"},
		{`{"pod": "p", "memory": "1Gi"}`, "memory applies to pods dsh creates"},
		{`{"image": "a", "podSelector": "a in (b"}`, "exclude each other"},
		{`{"podSelector": "a in (b"}`, "podSelector"},
		{`{"image": "a", "env": {"1BAD": "x"}}`, "is not a variable name"},
		{`{"image": "a", "colour": "red"}`, "unknown field"},
	} {
		_, err := DecodeConfig(json.RawMessage(tc.raw))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.raw, err, tc.want)
		}
	}
}

// A pod from an empty template gets the safe defaults; what a template
// sets is kept.
func TestBuildPodDefaults(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Image = "img"
	cfg.HelperImage = "helper"
	b := &Backend{cfg: *cfg, ns: "ns", instance: "i1", template: &corev1.Pod{}}
	pod := b.buildPod(termapi.SpawnSpec{OwnerID: "Agent 7", SessionID: "s1"}, b.configLimits())
	ps := pod.Spec
	if !strings.HasPrefix(pod.Name, "dsh-agent-7-") {
		t.Errorf("name %q", pod.Name)
	}
	if pod.Labels[labelOwner] != labelValue("Agent 7") || pod.Annotations[annotationOwner] != "Agent 7" || pod.Labels[labelIdentity] != "dsh" || pod.Labels[labelInstance] != "i1" {
		t.Errorf("labels %v, annotations %v", pod.Labels, pod.Annotations)
	}
	if *ps.AutomountServiceAccountToken || *ps.EnableServiceLinks || ps.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("token %v, service links %v, restart %s", *ps.AutomountServiceAccountToken, *ps.EnableServiceLinks, ps.RestartPolicy)
	}
	if sc := ps.SecurityContext; *sc.RunAsUser != 1000 || *sc.RunAsGroup != 1000 || !*sc.RunAsNonRoot || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v", sc)
	}
	if len(ps.Containers) != 1 || len(ps.InitContainers) != 1 {
		t.Fatalf("%d containers, %d init containers", len(ps.Containers), len(ps.InitContainers))
	}
	for _, c := range []corev1.Container{ps.Containers[0], ps.InitContainers[0]} {
		sc := c.SecurityContext
		if *sc.Privileged || *sc.AllowPrivilegeEscalation || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
			t.Errorf("container %s security context %+v", c.Name, sc)
		}
	}
	shell := ps.Containers[0]
	if mem := shell.Resources.Limits[corev1.ResourceMemory]; mem.String() != "2Gi" {
		t.Errorf("memory limit %s", mem.String())
	}
	if shell.WorkingDir != "/workspace" || shell.Command[0] != defaultHelperPath || shell.Command[1] != "hold" {
		t.Errorf("working dir %q, command %q", shell.WorkingDir, shell.Command)
	}

	// A template's own choices stay.
	tmpl := &corev1.Pod{}
	tmpl.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr(int64(0))}
	tmpl.Spec.Containers = []corev1.Container{{Name: "shell", Image: "mine", SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}}}
	cfg.Image = ""
	b = &Backend{cfg: *cfg, ns: "ns", instance: "i1", template: tmpl}
	pod = b.buildPod(termapi.SpawnSpec{OwnerID: "o"}, b.configLimits())
	if *pod.Spec.SecurityContext.RunAsUser != 0 || pod.Spec.SecurityContext.RunAsNonRoot != nil {
		t.Errorf("the template's user: %+v", pod.Spec.SecurityContext)
	}
	if c := pod.Spec.Containers[0]; c.Image != "mine" || len(c.SecurityContext.Capabilities.Add) != 1 {
		t.Errorf("the template's container: %s %+v", c.Image, c.SecurityContext)
	}
	if tmpl.Spec.Containers[0].VolumeMounts != nil {
		t.Error("buildPod changed the template")
	}
}
