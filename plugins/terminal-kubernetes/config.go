package terminalkubernetes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/dshdev/dsh/config"
)

// Config configures the kubernetes backend. With Image (or a PodTemplate
// that names one), every owner gets a pod of its own; with Pod or
// PodSelector, sessions are execs into a pod someone else manages. Every
// duration is in milliseconds.
type Config struct {
	// BackendType is the name sessions are spawned under in the terminals
	// service.
	BackendType string `json:"backendType"`
	// Kubeconfig is the kubeconfig file to reach the cluster with. Empty:
	// the in-cluster service account when dsh runs in a pod, else
	// KUBECONFIG, else ~/.kube/config.
	Kubeconfig string `json:"kubeconfig"`
	// Context is the kubeconfig's context to use; empty: its current one.
	Context string `json:"context"`
	// Namespace is where pods are made or found. Empty: the kubeconfig
	// context's namespace, in a pod its own, else "default".
	Namespace string `json:"namespace"`
	// Identity names this dsh (or this fleet of dsh instances) on its pods
	// (label dsh.dev/identity). At load, and from then on, pods of the
	// same identity whose dsh instance no longer renews its lease are
	// removed: a dsh that was killed leaves nothing for long.
	Identity string `json:"identity"`
	// LeaseSeconds is how long an instance's lease lasts without renewal
	// (it is renewed every third of it): how soon after a dsh dies its
	// pods are removed by another, or by the next one to start.
	LeaseSeconds int `json:"leaseSeconds"`

	// Image is the image of the owners' pods' shell container, which must
	// have bash. Nothing is pulled unless the template's pull policy says
	// so: the default policy is IfNotPresent.
	Image string `json:"image"`
	// PodTemplate is the path of a YAML (or JSON) Pod that the owners'
	// pods start from: its labels, annotations and spec (resources,
	// runtime class, node selector, tolerations, security context,
	// volumes, more containers). dsh adds its labels, the shell container
	// if the template has none of that name, the workspace and the helper,
	// and safe defaults for what the template leaves unset (see the
	// package documentation). A relative path is relative to dsh's working
	// directory.
	PodTemplate string `json:"podTemplate"`
	// Container is the name of the shell's container in the pod.
	Container string `json:"container"`
	// NodeName places the pods on that node, without the scheduler.
	NodeName string `json:"nodeName"`
	// NodeSelector selects the nodes the pods may run on.
	NodeSelector map[string]string `json:"nodeSelector"`
	// RuntimeClassName runs the pods with that RuntimeClass (gVisor,
	// Kata: a sandbox beyond the container's).
	RuntimeClassName string `json:"runtimeClassName"`
	// Memory limits the shell container's memory ("512Mi", "2Gi"). Empty:
	// 2Gi; "unlimited": no limit.
	Memory string `json:"memory"`
	// CPU limits the shell container's CPU time, in cores ("500m", "2").
	// Empty: no limit.
	CPU string `json:"cpu"`
	// RunAsUser and RunAsGroup are the ids the shell runs as in created
	// pods; -1 leaves them to the template and the image. The default
	// (1000) runs it as a user without privileges, with runAsNonRoot.
	RunAsUser  int64 `json:"runAsUser"`
	RunAsGroup int64 `json:"runAsGroup"`
	// WorkspaceClaim is a PersistentVolumeClaim to keep the owners'
	// workspaces on, each owner in a directory of its own (subPath).
	// Empty: an emptyDir per pod, gone with the pod.
	WorkspaceClaim string `json:"workspaceClaim"`
	// MountPath is where the workspace is mounted, and where the shell
	// starts.
	MountPath string `json:"mountPath"`
	// GracePeriodSeconds is the grace period of a pod's deletion. The
	// helper has ended the shell's processes by then; 0 deletes at once.
	GracePeriodSeconds int64 `json:"gracePeriodSeconds"`
	// Parent makes every created pod a dependent of this object (an owner
	// reference): deleting the parent deletes the pods. In a pod, dsh's
	// own pod is a good parent (its uid from the downward API).
	Parent *ParentRef `json:"parent,omitempty"`

	// Pod is an existing pod to exec every session's shell into, instead
	// of creating pods. It is never deleted.
	Pod string `json:"pod"`
	// PodSelector is a label selector ("app=sandbox,team=a") of existing
	// pods: each session goes to the running pod with the fewest of this
	// dsh's sessions (the first by name among equals).
	PodSelector string `json:"podSelector"`

	// HelperImage is an image holding the pod helper (cmd/dsh-kube-helper)
	// at /dsh-kube-helper: an init container copies it into the pod,
	// which gives the stdin proof, SIGTERM, SIGKILL and SIGHUP, and the
	// sweep at close. Created pods only.
	HelperImage string `json:"helperImage"`
	// HelperPath is where the helper is in the shell's container: where
	// the init container puts it (default /.dsh/dsh-kube-helper), or where
	// the image (or an existing pod) has it. Empty without HelperImage:
	// no helper; a program waiting for input is then inferred from
	// silence, and only the signals a terminal has a character for work.
	HelperPath string `json:"helperPath"`

	// Shell is bash's path in the container.
	Shell string `json:"shell"`
	// Env sets variables for the shell: in the created pods' shell
	// container, and in the shell of an exec into an existing pod.
	// Nothing of dsh's own environment reaches the pod.
	Env map[string]string `json:"env"`
	// MaxConcurrentSpawns bounds the sessions starting at once (pods
	// being created, shells starting); more wait their turn, in order.
	MaxConcurrentSpawns int `json:"maxConcurrentSpawns"`
	// WarmPods keeps this many created pods started and unclaimed, so
	// that an owner's first session skips the pod's start. Created pods
	// only.
	WarmPods int `json:"warmPods"`
	// ExecTransport is how execs reach the pods: "" (WebSocket, and SPDY
	// where the API server does not take WebSocket), "websocket" or
	// "spdy".
	ExecTransport string `json:"execTransport" jsonschema:"enum=,enum=websocket,enum=spdy"`
	// IdleSilenceMs is how long a send waits without output and without
	// proof that the terminal waits for input before it settles as
	// inferred_idle.
	IdleSilenceMs int `json:"idleSilenceMs"`
	// TimeoutMs bounds one send, and the start of a session (the pod and
	// the shell), when the send does not set its own timeout.
	TimeoutMs int `json:"timeoutMs"`
}

// ParentRef names the object created pods depend on.
type ParentRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	UID        string `json:"uid"`
}

// Type is the default backend type.
const Type = "kubernetes"

// The defaults of what the config leaves unset.
const (
	defaultMemory     = "2Gi"
	memoryUnlimited   = "unlimited"
	defaultUser       = 1000
	defaultHelperPath = "/.dsh/dsh-kube-helper"
)

// DefaultConfig returns the configuration a deployment starts from.
func DefaultConfig() *Config {
	return &Config{
		BackendType:         Type,
		Identity:            "dsh",
		LeaseSeconds:        15,
		Container:           "shell",
		RunAsUser:           defaultUser,
		RunAsGroup:          defaultUser,
		MountPath:           "/workspace",
		Shell:               "/bin/bash",
		MaxConcurrentSpawns: 8,
		IdleSilenceMs:       3000,
		TimeoutMs:           60000,
	}
}

// DecodeConfig decodes a config given as JSON over the defaults, strictly
// (an unknown key is an error), and validates it.
func DecodeConfig(raw json.RawMessage) (*Config, error) {
	cfg := DefaultConfig()
	if len(bytes.TrimSpace(raw)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(cfg); err != nil {
			return nil, fmt.Errorf("terminal-kubernetes: config: %w", err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// maxMillis bounds every millisecond setting, as the other backends do.
const maxMillis = 1<<31 - 1

// dnsLabel is what a label value made from the identity must look like.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$`)

// created reports whether the config creates pods (rather than exec into
// existing ones).
func (c *Config) created() bool { return c.Pod == "" && c.PodSelector == "" }

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	fail := func(field, format string, args ...any) error {
		return config.FieldErrorf(field, "terminal-kubernetes: "+format, args...)
	}
	modes := 0
	for _, set := range []bool{c.Image != "" || c.PodTemplate != "", c.Pod != "", c.PodSelector != ""} {
		if set {
			modes++
		}
	}
	switch {
	case c.BackendType == "":
		return fail("backendType", "backendType must be non-empty")
	case modes == 0:
		return fail("image", "set image or podTemplate (a pod per owner), pod, or podSelector (existing pods)")
	case modes > 1:
		return fail("pod", "image or podTemplate, pod, and podSelector exclude each other: set one")
	case !dnsLabel.MatchString(c.Identity):
		return fail("identity", "identity must be lower-case letters, digits and '-', at most 40, starting and ending with a letter or digit; got %q", c.Identity)
	case c.LeaseSeconds < 3 || c.LeaseSeconds > 3600:
		return fail("leaseSeconds", "leaseSeconds must be between 3 and 3600")
	case c.Container == "":
		return fail("container", "container must be non-empty")
	case !path.IsAbs(c.MountPath):
		return fail("mountPath", "mountPath must be an absolute path in the container; got %q", c.MountPath)
	case !path.IsAbs(c.Shell):
		return fail("shell", "shell must be an absolute path in the container; got %q", c.Shell)
	case c.HelperPath != "" && !path.IsAbs(c.HelperPath):
		return fail("helperPath", "helperPath must be an absolute path in the container; got %q", c.HelperPath)
	case c.GracePeriodSeconds < 0:
		return fail("gracePeriodSeconds", "gracePeriodSeconds must not be negative")
	case c.RunAsUser < -1 || c.RunAsGroup < -1:
		return fail("runAsUser", "runAsUser and runAsGroup must be ids, or -1 for the image's")
	case c.MaxConcurrentSpawns < 1:
		return fail("maxConcurrentSpawns", "maxConcurrentSpawns must be at least 1")
	case c.WarmPods < 0:
		return fail("warmPods", "warmPods must not be negative")
	case c.WarmPods > 0 && c.WorkspaceClaim != "":
		return fail("warmPods", "warmPods and workspaceClaim exclude each other: a warm pod has no owner, so no workspace of its own yet")
	case c.ExecTransport != transportAuto && c.ExecTransport != transportWebSocket && c.ExecTransport != transportSPDY:
		return fail("execTransport", "execTransport must be empty, %q or %q; got %q", transportWebSocket, transportSPDY, c.ExecTransport)
	}
	if c.Memory != "" && c.Memory != memoryUnlimited {
		if _, err := resource.ParseQuantity(c.Memory); err != nil {
			return fail("memory", "memory must be a quantity (512Mi, 2Gi) or %q: %v", memoryUnlimited, err)
		}
	}
	if c.CPU != "" {
		if _, err := resource.ParseQuantity(c.CPU); err != nil {
			return fail("cpu", "cpu must be a quantity (500m, 2): %v", err)
		}
	}
	if c.PodSelector != "" {
		if _, err := labels.Parse(c.PodSelector); err != nil {
			return fail("podSelector", "podSelector: %v", err)
		}
	}
	if c.PodTemplate != "" {
		if _, err := os.Stat(c.PodTemplate); err != nil {
			return fail("podTemplate", "podTemplate: %v", err)
		}
	}
	if c.Kubeconfig != "" {
		if _, err := os.Stat(filepath.Clean(c.Kubeconfig)); err != nil {
			return fail("kubeconfig", "kubeconfig: %v", err)
		}
	}
	if p := c.Parent; p != nil && (p.APIVersion == "" || p.Kind == "" || p.Name == "" || p.UID == "") {
		return fail("parent", "parent needs apiVersion, kind, name and uid")
	}
	if !c.created() {
		for _, f := range []struct {
			field string
			set   bool
		}{
			{"helperImage", c.HelperImage != ""}, {"workspaceClaim", c.WorkspaceClaim != ""},
			{"memory", c.Memory != ""}, {"cpu", c.CPU != ""}, {"nodeName", c.NodeName != ""},
			{"nodeSelector", len(c.NodeSelector) > 0}, {"runtimeClassName", c.RuntimeClassName != ""},
			{"parent", c.Parent != nil}, {"warmPods", c.WarmPods != 0},
		} {
			if f.set {
				return fail(f.field, "%s applies to pods dsh creates (image or podTemplate), not to existing pods", f.field)
			}
		}
	}
	for name := range c.Env {
		if !envName.MatchString(name) {
			return fail("env", "env: %q is not a variable name", name)
		}
	}
	for _, p := range []struct {
		field string
		value int
	}{{"idleSilenceMs", c.IdleSilenceMs}, {"timeoutMs", c.TimeoutMs}} {
		if p.value <= 0 || p.value > maxMillis {
			return fail(p.field, "%s must be a positive integer of at most %d", p.field, maxMillis)
		}
	}
	return nil
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
