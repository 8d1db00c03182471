package terminalkubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// The labels and annotations on the pods dsh creates. The owner's and the
// session's ids are label values where they fit one; the annotations keep
// them whole.
const (
	labelManagedBy      = "app.kubernetes.io/managed-by"
	managedByDSH        = "dsh"
	labelIdentity       = "dsh.dev/identity"
	labelInstance       = "dsh.dev/instance"
	labelOwner          = "dsh.dev/owner"
	labelSession        = "dsh.dev/session"
	labelPool           = "dsh.dev/pool"
	annotationOwner     = "dsh.dev/owner-id"
	annotationSession   = "dsh.dev/session-id"
	workspaceVolume     = "dsh-workspace"
	helperVolume        = "dsh-helper"
	helperContainer     = "dsh-helper"
	helperInImage       = "/dsh-kube-helper"
	defaultMemoryReq    = "32Mi"
	defaultCPURequest   = "10m"
	firstPollInterval   = 10 * time.Millisecond
	maxPollInterval     = 200 * time.Millisecond
	podEventsInAnError  = 3
	maxPodNameOwnerPart = 20
)

// ownerPod is an owner's created pod, shared by the owner's sessions and
// deleted with the last of them.
type ownerPod struct {
	name  string
	refs  int
	ready chan struct{} // closed once the pod runs, or failed to (err)
	err   error
}

// acquire returns the pod a session of spec runs in, and the release that
// gives it back.
func (b *Backend) acquire(ctx context.Context, spec termapi.SpawnSpec, limits termapi.Limits) (string, func(context.Context) error, error) {
	switch {
	case b.cfg.Pod != "":
		pod, err := b.existingPod(ctx)
		if err != nil {
			return "", nil, err
		}
		return pod.Name, func(context.Context) error { return nil }, nil
	case b.cfg.PodSelector != "":
		pod, err := b.pickPod(ctx, true)
		if err != nil {
			return "", nil, err
		}
		return pod.Name, func(context.Context) error {
			b.mu.Lock()
			if b.load[pod.Name]--; b.load[pod.Name] <= 0 {
				delete(b.load, pod.Name)
			}
			b.mu.Unlock()
			return nil
		}, nil
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return "", nil, errShutdown
	}
	op := b.owners[spec.OwnerID]
	create := op == nil
	if create {
		op = &ownerPod{ready: make(chan struct{})}
		b.owners[spec.OwnerID] = op
	}
	op.refs++
	b.mu.Unlock()
	release := func(ctx context.Context) error { return b.releaseOwnerPod(ctx, spec.OwnerID, op) }
	if create {
		op.name, op.err = b.ownerPodFor(ctx, spec, limits)
		close(op.ready)
	} else {
		select {
		case <-op.ready:
		case <-ctx.Done():
			err := fmt.Errorf("%w: waiting for the owner's pod: %w", ErrPodStart, context.Cause(ctx))
			return "", nil, errors.Join(err, release(context.WithoutCancel(ctx)))
		}
	}
	if op.err != nil {
		return "", nil, errors.Join(op.err, release(context.WithoutCancel(ctx)))
	}
	return op.name, release, nil
}

// ownerPodFor returns a running pod for the owner of spec: one from the
// warm pool, or a new one.
func (b *Backend) ownerPodFor(ctx context.Context, spec termapi.SpawnSpec, limits termapi.Limits) (string, error) {
	if b.pool != nil && limits == b.configLimits() {
		if name := b.pool.claim(ctx, spec); name != "" {
			return name, nil
		}
	}
	pod := b.buildPod(spec, limits)
	return pod.Name, b.startPod(ctx, pod)
}

// releaseOwnerPod gives a session's reference to op back, and deletes the
// pod with the last one.
func (b *Backend) releaseOwnerPod(ctx context.Context, owner string, op *ownerPod) error {
	b.mu.Lock()
	op.refs--
	last := op.refs == 0
	if last && b.owners[owner] == op {
		delete(b.owners, owner)
	}
	b.mu.Unlock()
	if !last || op.name == "" {
		return nil
	}
	return b.deletePod(ctx, op.name)
}

// startPod creates pod and waits for it to run. A pod that fails to is
// deleted again.
func (b *Backend) startPod(ctx context.Context, pod *corev1.Pod) error {
	if _, err := b.api.CoreV1().Pods(b.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("%w: create pod %s/%s: %v", ErrPodStart, b.ns, pod.Name, err)
	}
	if err := b.waitRunning(ctx, pod.Name); err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusBound)
		defer cancel()
		if derr := b.deletePod(dctx, pod.Name); derr != nil {
			return &termapi.CleanupError{StartErr: err, CleanupErr: derr}
		}
		return err
	}
	return nil
}

// waitRunning polls the pod until its containers run, it fails, or ctx
// ends; the error names the pod's last state and its warning events.
func (b *Backend) waitRunning(ctx context.Context, name string) error {
	t := time.NewTimer(firstPollInterval)
	defer t.Stop()
	last := "not yet seen"
	for delay := firstPollInterval; ; delay = min(2*delay, maxPollInterval) {
		pod, err := b.api.CoreV1().Pods(b.ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil:
			running, state, failed := podState(pod)
			if running {
				return nil
			}
			last = state
			if failed {
				return fmt.Errorf("%w: pod %s/%s: %s", ErrPodStart, b.ns, name, state)
			}
		case ctx.Err() == nil && !apierrors.IsNotFound(err):
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: pod %s/%s is not running: %s%s: %w", ErrPodStart, b.ns, name, last, b.podWarnings(name), context.Cause(ctx))
		case <-t.C:
		}
		t.Reset(delay)
	}
}

// podState says whether the pod's shell container runs, what state it is
// in, and whether it will never run.
func podState(pod *corev1.Pod) (running bool, state string, failed bool) {
	switch pod.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		return false, fmt.Sprintf("phase %s: %s %s", pod.Status.Phase, pod.Status.Reason, pod.Status.Message), true
	}
	if pod.DeletionTimestamp != nil {
		return false, "being deleted", true
	}
	for _, cs := range pod.Status.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return false, fmt.Sprintf("init container %s exited with code %d: %s %s", cs.Name, t.ExitCode, t.Reason, t.Message), true
		}
		if w := cs.State.Waiting; w != nil && fatalWaiting[w.Reason] {
			return false, fmt.Sprintf("init container %s: %s: %s", cs.Name, w.Reason, w.Message), true
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && fatalWaiting[w.Reason] {
			return false, fmt.Sprintf("container %s: %s: %s", cs.Name, w.Reason, w.Message), true
		}
	}
	if pod.Status.Phase == corev1.PodRunning {
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.State.Running == nil {
				return false, fmt.Sprintf("container %s not running yet", cs.Name), false
			}
		}
		return true, "running", false
	}
	state = "phase " + string(pod.Status.Phase)
	for _, c := range pod.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Reason != "" {
			state += fmt.Sprintf(", %s: %s %s", c.Type, c.Reason, c.Message)
		}
	}
	for _, cs := range append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil {
			state += fmt.Sprintf(", container %s: %s", cs.Name, w.Reason)
		}
	}
	return false, state, false
}

// fatalWaiting are the waiting reasons a container does not recover from
// on its own.
var fatalWaiting = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "ErrImageNeverPull": true, "InvalidImageName": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

// podWarnings are the pod's latest warning events, to explain a pod that
// does not start (FailedCreatePodSandBox, FailedScheduling, FailedMount);
// empty where events cannot be listed.
func (b *Backend) podWarnings(name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list, err := b.api.CoreV1().Events(b.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",type=Warning"})
	if err != nil || len(list.Items) == 0 {
		return ""
	}
	items := list.Items
	slices.SortFunc(items, func(a, c corev1.Event) int { return a.LastTimestamp.Compare(c.LastTimestamp.Time) })
	items = items[max(0, len(items)-podEventsInAnError):]
	var out []string
	for _, e := range items {
		out = append(out, e.Reason+": "+e.Message)
	}
	return "; events: " + strings.Join(out, "; ")
}

// deletePod deletes a created pod with the configured grace period, and
// returns once it is gone from the API (with a grace period of 0, at
// once).
func (b *Backend) deletePod(ctx context.Context, name string) error {
	grace := b.cfg.GracePeriodSeconds
	err := b.api.CoreV1().Pods(b.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("terminal-kubernetes: delete pod %s/%s: %w", b.ns, name, err)
	}
	if grace == 0 {
		return nil
	}
	t := time.NewTimer(firstPollInterval)
	defer t.Stop()
	for delay := firstPollInterval; ; delay = min(2*delay, maxPollInterval) {
		if _, err := b.api.CoreV1().Pods(b.ns).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("terminal-kubernetes: pod %s/%s is still being deleted: %w", b.ns, name, context.Cause(ctx))
		case <-t.C:
		}
		t.Reset(delay)
	}
}

// podGone says why the pod a shell ran in is gone or going (deleted,
// evicted, failed), or "" if it still runs or cannot be asked.
func (b *Backend) podGone(ctx context.Context, name string) string {
	pod, err := b.api.CoreV1().Pods(b.ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("pod %s/%s was deleted", b.ns, name)
	case err != nil:
		return ""
	case pod.DeletionTimestamp != nil:
		if why := disruption(pod); why != "" {
			return fmt.Sprintf("pod %s/%s was evicted: %s", b.ns, name, why)
		}
		return fmt.Sprintf("pod %s/%s is being deleted", b.ns, name)
	case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
		why := strings.TrimSpace(pod.Status.Reason + " " + pod.Status.Message)
		if why == "" {
			why = "phase " + string(pod.Status.Phase)
		}
		return fmt.Sprintf("pod %s/%s ended: %s", b.ns, name, why)
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == b.cfg.Container || len(pod.Status.ContainerStatuses) == 1 {
			if t := cs.State.Terminated; t != nil {
				return fmt.Sprintf("container %s of pod %s/%s ended: %s (exit code %d)", cs.Name, b.ns, name, t.Reason, t.ExitCode)
			}
			if cs.RestartCount > 0 && cs.LastTerminationState.Terminated != nil {
				t := cs.LastTerminationState.Terminated
				return fmt.Sprintf("container %s of pod %s/%s was restarted after it ended: %s (exit code %d)", cs.Name, b.ns, name, t.Reason, t.ExitCode)
			}
		}
	}
	return ""
}

// disruption is why the cluster is taking pod away (the DisruptionTarget
// condition that the Eviction API, a preemption or the taint manager sets
// before it deletes the pod), or "" for a plain delete. Once the pod has
// gone, only "deleted" is left to say.
func disruption(pod *corev1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return strings.TrimSuffix(c.Reason+": "+c.Message, ": ")
		}
	}
	return ""
}

// existingPod returns the configured pod, if it runs.
func (b *Backend) existingPod(ctx context.Context) (*corev1.Pod, error) {
	pod, err := b.api.CoreV1().Pods(b.ns).Get(ctx, b.cfg.Pod, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("%w: no pod %s/%s", ErrNoPod, b.ns, b.cfg.Pod)
	case err != nil:
		return nil, fmt.Errorf("%w: get pod %s/%s at %s: %v", ErrUnreachable, b.ns, b.cfg.Pod, b.rest.Host, err)
	}
	if running, state, _ := podState(pod); !running {
		return nil, fmt.Errorf("%w: pod %s/%s: %s", ErrNoPod, b.ns, b.cfg.Pod, state)
	}
	return pod, nil
}

// pickPod returns the running pod of the selector with the fewest of this
// backend's sessions; with take, it counts one more session on it.
func (b *Backend) pickPod(ctx context.Context, take bool) (*corev1.Pod, error) {
	list, err := b.api.CoreV1().Pods(b.ns).List(ctx, metav1.ListOptions{LabelSelector: b.cfg.PodSelector})
	if err != nil {
		return nil, fmt.Errorf("%w: list pods %q in %s at %s: %v", ErrUnreachable, b.cfg.PodSelector, b.ns, b.rest.Host, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var best *corev1.Pod
	for i := range list.Items {
		p := &list.Items[i]
		if running, _, _ := podState(p); !running {
			continue
		}
		if best == nil || b.load[p.Name] < b.load[best.Name] || (b.load[p.Name] == b.load[best.Name] && p.Name < best.Name) {
			best = p
		}
	}
	if best == nil {
		return nil, fmt.Errorf("%w: no running pod matches %q in %s", ErrNoPod, b.cfg.PodSelector, b.ns)
	}
	if take {
		b.load[best.Name]++
	}
	return best, nil
}

// containerOf is the shell's container in pod: the configured one, or, in
// an existing pod of one container, that one.
func (b *Backend) containerOf(ctx context.Context, name string) (string, error) {
	if b.cfg.created() {
		return b.cfg.Container, nil
	}
	pod, err := b.api.CoreV1().Pods(b.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("%w: get pod %s/%s: %v", ErrNoPod, b.ns, name, err)
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == b.cfg.Container {
			return c.Name, nil
		}
	}
	if len(pod.Spec.Containers) == 1 && b.cfg.Container == DefaultConfig().Container {
		return pod.Spec.Containers[0].Name, nil
	}
	return "", fmt.Errorf("%w: pod %s/%s has no container %q", ErrNoPod, b.ns, name, b.cfg.Container)
}

// loadTemplate reads the pod template, or starts from an empty pod.
func (b *Backend) loadTemplate() (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	if b.cfg.PodTemplate == "" {
		return pod, nil
	}
	f, err := os.Open(b.cfg.PodTemplate)
	if err != nil {
		return nil, fmt.Errorf("terminal-kubernetes: podTemplate: %w", err)
	}
	defer f.Close()
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(pod); err != nil {
		return nil, fmt.Errorf("terminal-kubernetes: podTemplate %s: %w", b.cfg.PodTemplate, err)
	}
	if pod.Kind != "" && pod.Kind != "Pod" {
		return nil, fmt.Errorf("terminal-kubernetes: podTemplate %s: kind %q, want Pod", b.cfg.PodTemplate, pod.Kind)
	}
	if b.cfg.Image == "" {
		if c := findContainer(pod.Spec.Containers, b.cfg.Container); c == nil || c.Image == "" {
			return nil, fmt.Errorf("terminal-kubernetes: podTemplate %s has no container %q with an image, and the config sets no image", b.cfg.PodTemplate, b.cfg.Container)
		}
	}
	return pod, nil
}

func findContainer(cs []corev1.Container, name string) *corev1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

// configLimits are the limits the config gives the shell's container.
func (b *Backend) configLimits() termapi.Limits {
	var l termapi.Limits
	if !b.cfg.created() {
		return l
	}
	mem := b.cfg.Memory
	if mem == "" {
		mem = defaultMemory
	}
	if mem != memoryUnlimited {
		q := resource.MustParse(mem)
		l.Memory = q.Value()
	}
	if b.cfg.CPU != "" {
		q := resource.MustParse(b.cfg.CPU)
		l.CPU = float64(q.MilliValue()) / 1000
	}
	return l
}

// limitsFor are the limits a session's pod gets for a spawn asking for
// want: the tighter of the config's and want's, field by field. The pod
// spec has no pids limit (the node's kubelet sets one for every pod), so
// one asked for is refused.
func (b *Backend) limitsFor(want termapi.Limits) (termapi.Limits, error) {
	l := b.configLimits()
	if !b.cfg.created() {
		return l, nil
	}
	if want.Memory > 0 && (l.Memory == 0 || want.Memory < l.Memory) {
		l.Memory = want.Memory
	}
	if want.CPU > 0 && (l.CPU == 0 || want.CPU < l.CPU) {
		l.CPU = want.CPU
	}
	return l, nil
}

// buildPod is the pod of an owner's sessions, from the template.
func (b *Backend) buildPod(spec termapi.SpawnSpec, limits termapi.Limits) *corev1.Pod {
	pod := b.template.DeepCopy()
	pod.TypeMeta = metav1.TypeMeta{}
	pod.Status = corev1.PodStatus{}
	pod.ObjectMeta = metav1.ObjectMeta{
		Name:        podName(spec.OwnerID),
		Namespace:   b.ns,
		Labels:      maps.Clone(pod.Labels),
		Annotations: maps.Clone(pod.Annotations),
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	maps.Copy(pod.Labels, b.podLabels())
	if spec.OwnerID != "" || spec.SessionID != "" {
		pod.Labels[labelOwner] = labelValue(spec.OwnerID)
		pod.Labels[labelSession] = labelValue(spec.SessionID)
		pod.Annotations[annotationOwner] = spec.OwnerID
		pod.Annotations[annotationSession] = spec.SessionID
	}
	if p := b.cfg.Parent; p != nil {
		pod.OwnerReferences = append(pod.OwnerReferences, metav1.OwnerReference{
			APIVersion: p.APIVersion, Kind: p.Kind, Name: p.Name, UID: types.UID(p.UID),
		})
	}
	ps := &pod.Spec
	ps.RestartPolicy = corev1.RestartPolicyNever
	if ps.AutomountServiceAccountToken == nil {
		ps.AutomountServiceAccountToken = ptr(false)
	}
	if ps.EnableServiceLinks == nil {
		ps.EnableServiceLinks = ptr(false)
	}
	if ps.TerminationGracePeriodSeconds == nil {
		ps.TerminationGracePeriodSeconds = ptr(b.cfg.GracePeriodSeconds)
	}
	if b.cfg.NodeName != "" {
		ps.NodeName = b.cfg.NodeName
	}
	if len(b.cfg.NodeSelector) > 0 {
		if ps.NodeSelector == nil {
			ps.NodeSelector = map[string]string{}
		}
		maps.Copy(ps.NodeSelector, b.cfg.NodeSelector)
	}
	if b.cfg.RuntimeClassName != "" {
		ps.RuntimeClassName = ptr(b.cfg.RuntimeClassName)
	}
	if ps.SecurityContext == nil {
		ps.SecurityContext = &corev1.PodSecurityContext{}
	}
	sc := ps.SecurityContext
	if b.cfg.RunAsUser >= 0 && sc.RunAsUser == nil {
		sc.RunAsUser = ptr(b.cfg.RunAsUser)
		if sc.RunAsNonRoot == nil && b.cfg.RunAsUser != 0 {
			sc.RunAsNonRoot = ptr(true)
		}
	}
	if b.cfg.RunAsGroup >= 0 && sc.RunAsGroup == nil {
		sc.RunAsGroup = ptr(b.cfg.RunAsGroup)
		if sc.FSGroup == nil {
			sc.FSGroup = ptr(b.cfg.RunAsGroup)
		}
	}
	if sc.SeccompProfile == nil {
		sc.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	}

	shell := findContainer(ps.Containers, b.cfg.Container)
	if shell == nil {
		ps.Containers = append([]corev1.Container{{Name: b.cfg.Container}}, ps.Containers...)
		shell = &ps.Containers[0]
	}
	if b.cfg.Image != "" {
		shell.Image = b.cfg.Image
	}
	if shell.ImagePullPolicy == "" {
		shell.ImagePullPolicy = corev1.PullIfNotPresent
	}
	helper := b.helperPath()
	if len(shell.Command) == 0 {
		if helper != "" {
			shell.Command = []string{helper, "hold"}
		} else {
			// A bash that reads a stdin nobody writes: the container's
			// process, while the shells are execs beside it.
			shell.Command = []string{b.cfg.Shell, "--noprofile", "--norc"}
			shell.Stdin = true
		}
	}
	if shell.WorkingDir == "" {
		shell.WorkingDir = b.cfg.MountPath
	}
	for _, k := range slices.Sorted(maps.Keys(b.cfg.Env)) {
		shell.Env = append(shell.Env, corev1.EnvVar{Name: k, Value: b.cfg.Env[k]})
	}
	restrict(&shell.SecurityContext)
	setResources(shell, limits)

	// The workspace.
	ws := corev1.Volume{Name: workspaceVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	mount := corev1.VolumeMount{Name: workspaceVolume, MountPath: b.cfg.MountPath}
	if b.cfg.WorkspaceClaim != "" {
		ws.VolumeSource = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: b.cfg.WorkspaceClaim}}
		mount.SubPath = workspaceDir(spec.OwnerID)
	}
	ps.Volumes = append(ps.Volumes, ws)
	shell.VolumeMounts = append(shell.VolumeMounts, mount)

	// The helper, copied in by an init container.
	if b.cfg.HelperImage != "" {
		dir := path.Dir(helper)
		ps.Volumes = append(ps.Volumes, corev1.Volume{Name: helperVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		shell.VolumeMounts = append(shell.VolumeMounts, corev1.VolumeMount{Name: helperVolume, MountPath: dir, ReadOnly: true})
		init := corev1.Container{
			Name:            helperContainer,
			Image:           b.cfg.HelperImage,
			ImagePullPolicy: corev1.PullIfNotPresent,
			Command:         []string{helperInImage, "install", helper},
			VolumeMounts:    []corev1.VolumeMount{{Name: helperVolume, MountPath: dir}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(defaultMemoryReq), corev1.ResourceCPU: resource.MustParse(defaultCPURequest)},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
			},
		}
		restrict(&init.SecurityContext)
		ps.InitContainers = append([]corev1.Container{init}, ps.InitContainers...)
	}
	return pod
}

// restrict gives a container the safe defaults where its security context
// leaves them unset: no privilege, no escalation, no capability.
func restrict(scp **corev1.SecurityContext) {
	if *scp == nil {
		*scp = &corev1.SecurityContext{}
	}
	sc := *scp
	if sc.Privileged == nil {
		sc.Privileged = ptr(false)
	}
	if sc.AllowPrivilegeEscalation == nil {
		sc.AllowPrivilegeEscalation = ptr(false)
	}
	if sc.Capabilities == nil {
		sc.Capabilities = &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}
	}
}

// setResources sets the shell container's limits, and small requests where
// the template sets none: an idle shell needs little, and a request equal
// to the limit would make a node hold a handful of pods.
func setResources(c *corev1.Container, l termapi.Limits) {
	if c.Resources.Limits == nil {
		c.Resources.Limits = corev1.ResourceList{}
	}
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	if l.Memory > 0 {
		c.Resources.Limits[corev1.ResourceMemory] = *resource.NewQuantity(l.Memory, resource.BinarySI)
	}
	if l.CPU > 0 {
		c.Resources.Limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(l.CPU*1000), resource.DecimalSI)
	}
	for name, def := range map[corev1.ResourceName]string{corev1.ResourceMemory: defaultMemoryReq, corev1.ResourceCPU: defaultCPURequest} {
		if _, ok := c.Resources.Requests[name]; ok {
			continue
		}
		req := resource.MustParse(def)
		if lim, ok := c.Resources.Limits[name]; ok && lim.Cmp(req) < 0 {
			req = lim
		}
		c.Resources.Requests[name] = req
	}
}

// podLabels are the labels of every pod this backend creates.
func (b *Backend) podLabels() map[string]string {
	return map[string]string{labelManagedBy: managedByDSH, labelIdentity: b.cfg.Identity, labelInstance: b.instance}
}

// podName is a new pod's name: the owner's id as far as it is a DNS
// label, and random hex.
func podName(owner string) string {
	var part strings.Builder
	for _, r := range strings.ToLower(owner) {
		if part.Len() >= maxPodNameOwnerPart {
			break
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			part.WriteRune(r)
		} else if part.Len() > 0 && !strings.HasSuffix(part.String(), "-") {
			part.WriteByte('-')
		}
	}
	name := strings.TrimSuffix(part.String(), "-")
	if name == "" {
		return "dsh-" + randomHex(5)
	}
	return "dsh-" + name + "-" + randomHex(5)
}

// labelValue is s as a label value: itself where it is one, else a hash
// of it.
func labelValue(s string) string {
	if len(s) <= 63 && labelValueRE.MatchString(s) {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return "h-" + hex.EncodeToString(sum[:16])
}

// workspaceDir is an owner's directory on the workspace claim.
func workspaceDir(owner string) string {
	v := labelValue(owner)
	if v == "" {
		return "_"
	}
	return v
}

func listOptions(selector string, limit int64) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: selector, Limit: limit}
}

func ptr[T any](v T) *T { return &v }
