package terminalkubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/dshdev/dsh/plugins/terminal/backendkit"
	"github.com/dshdev/dsh/plugins/terminal/inband"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// Errors that callers branch on.
var (
	// ErrUnreachable: the API server does not answer, or refuses the
	// credentials.
	ErrUnreachable = errors.New("terminal-kubernetes: the Kubernetes API server is unreachable")
	// ErrNoPod: the configured pod does not exist or is not running, or no
	// running pod matches the selector.
	ErrNoPod = errors.New("terminal-kubernetes: no running pod")
	// ErrPodStart: a created pod did not reach Running.
	ErrPodStart = errors.New("terminal-kubernetes: the pod did not start")
	// ErrShell: the shell did not start, or did not reach its prompt.
	ErrShell = errors.New("terminal-kubernetes: the shell did not start")
)

// Backend starts a bash per session in a pod: a pod per owner that it
// creates and deletes, or an existing pod.
type Backend struct {
	cfg  Config
	rest *rest.Config
	api  kubernetes.Interface
	ns   string
	log  *slog.Logger
	// instance names this backend's process on its pods and its lease.
	instance string
	// template is the pod the owners' pods are made from (created mode).
	template *corev1.Pod
	// spawnSlots bounds the spawns under way; the others wait in line.
	spawnSlots chan struct{}

	mu     sync.Mutex
	owners map[string]*ownerPod // created pods, by owner
	load   map[string]int       // sessions per existing pod (selector mode)
	closed bool

	sessions backendkit.Sessions[*session]
	lease    *leaseKeeper
	pool     *warmPool
}

// New connects to the API server, checks what the config names (the
// namespace's pods can be listed; the configured pod runs), takes this
// instance's lease and removes what dead instances of the same identity
// left. log may be nil.
func New(ctx context.Context, cfg *Config, log *slog.Logger) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	quietClientGo()
	restCfg, ns, err := clientConfig(cfg)
	if err != nil {
		return nil, err
	}
	api, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	b := &Backend{
		cfg:        *cfg,
		rest:       restCfg,
		api:        api,
		ns:         ns,
		log:        log,
		instance:   randomHex(6),
		spawnSlots: make(chan struct{}, cfg.MaxConcurrentSpawns),
		owners:     make(map[string]*ownerPod),
		load:       make(map[string]int),
	}
	if cfg.created() {
		if b.template, err = b.loadTemplate(); err != nil {
			return nil, err
		}
	}
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	if cfg.created() {
		if b.lease, err = startLease(ctx, b); err != nil {
			return nil, err
		}
		if cfg.WarmPods > 0 {
			b.pool = startPool(b, cfg.WarmPods)
		}
	}
	return b, nil
}

// clientConfig reads the kubeconfig (or the in-cluster config) and the
// namespace to use.
func clientConfig(cfg *Config) (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if cfg.Kubeconfig != "" {
		rules.ExplicitPath = cfg.Kubeconfig
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: cfg.Context}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	restCfg, err := loader.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("%w: the client config: %v", ErrUnreachable, err)
	}
	ns := cfg.Namespace
	if ns == "" {
		if ns, _, err = loader.Namespace(); err != nil || ns == "" {
			ns = "default"
		}
	}
	// The client certificate and key are read once, now: with their paths
	// alone client-go would watch the files from goroutines that outlive
	// every client (a process-wide cache), for a rotation dsh has no use
	// for (a restart of the plugin reads them anew).
	if err := rest.LoadTLSFiles(restCfg); err != nil {
		return nil, "", fmt.Errorf("%w: the client config's files: %v", ErrUnreachable, err)
	}
	restCfg.UserAgent = "dsh-backend-kubernetes"
	// A session's calls come in bursts (a spawn, a close); the defaults
	// (5 per second) would queue twenty owners' spawns behind each other.
	restCfg.QPS, restCfg.Burst = 100, 200
	return restCfg, ns, nil
}

// check asks the API server for what the config names.
func (b *Backend) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, statusBound)
	defer cancel()
	switch {
	case b.cfg.Pod != "":
		_, err := b.existingPod(ctx)
		return err
	case b.cfg.PodSelector != "":
		_, err := b.pickPod(ctx, false)
		return err
	}
	if _, err := b.api.CoreV1().Pods(b.ns).List(ctx, listOptions(labelIdentity+"="+b.cfg.Identity, 1)); err != nil {
		return fmt.Errorf("%w: list pods in namespace %q at %s: %v", ErrUnreachable, b.ns, b.rest.Host, err)
	}
	return nil
}

// Type is the name the backend registers under.
func (b *Backend) Type() string { return b.cfg.BackendType }

// errShutdown is returned by Spawn once the backend has been closed.
var errShutdown = fmt.Errorf("terminal-kubernetes: backend is shut down: %w", termapi.ErrBackendClosed)

// Spawn starts a shell in the owner's pod (created, or taken from the warm
// pool, when the owner has none yet) or in an existing pod, and returns
// once the shell shows its first prompt. Spawns beyond
// MaxConcurrentSpawns wait their turn. If ctx ends first, or anything
// fails, what was started is removed again before Spawn returns.
func (b *Backend) Spawn(ctx context.Context, spec termapi.SpawnSpec) (termapi.Session, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	// The pod is the agent's boundary: a sandbox mode inside it is not
	// enforced, so it is refused, and so are limits the pod cannot have.
	limits, err := b.limitsFor(spec.Policy.Limits)
	if err != nil {
		return nil, err
	}
	if err := spec.Policy.Check(termapi.Capabilities{Limits: limits}); err != nil {
		return nil, fmt.Errorf("terminal-kubernetes: %w", err)
	}
	if b.sessions.Closed() {
		return nil, errShutdown
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(b.cfg.TimeoutMs)*time.Millisecond)
	defer cancel()
	select {
	case b.spawnSlots <- struct{}{}:
		defer func() { <-b.spawnSlots }()
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: waiting for a spawn slot (%d under way): %w", ErrShell, cap(b.spawnSlots), context.Cause(ctx))
	}
	pod, release, err := b.acquire(ctx, spec, limits)
	if err != nil {
		return nil, err
	}
	link, err := b.openShell(ctx, spec, pod)
	if err != nil {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), statusBound)
		defer rcancel()
		if rerr := release(rctx); rerr != nil {
			return nil, &termapi.CleanupError{StartErr: err, CleanupErr: rerr}
		}
		return nil, err
	}
	link.release = release
	var wrapper atomic.Pointer[session]
	o := inband.Options{
		ID:         spec.SessionID,
		OwnerID:    spec.OwnerID,
		Name:       spec.Name,
		Attachable: true,
		Limits:     limits,
		Prefix:     "terminal-kubernetes",
		Where:      "pod " + b.ns + "/" + pod,
		StartErr:   ErrShell,
		Echoes:     true,
		Idle:       time.Duration(b.cfg.IdleSilenceMs) * time.Millisecond,
		Timeout:    time.Duration(b.cfg.TimeoutMs) * time.Millisecond,
		WriteFile:  link.files.Write,
		Log:        b.log.With("session", spec.SessionID, "pod", pod),
		Forget: func(*inband.Session) {
			if w := wrapper.Load(); w != nil {
				b.sessions.Remove(w)
			}
		},
	}
	if link.ctrl != nil {
		o.WaitingForInput = link.waitingForInput
	}
	s, err := inband.Start(ctx, link, b.workdir(), o)
	if err != nil {
		return nil, err
	}
	if link.ctrl != nil {
		if err := link.ctrl.learn(ctx); err != nil {
			b.log.Debug("the helper did not learn the prompt's read; proofs of a read builtin are off", "err", err)
		}
	}
	w := &session{Session: s, link: link, pod: pod}
	wrapper.Store(w)
	if !b.sessions.Add(w) {
		return nil, backendkit.Refuse(ctx, w, statusBound, errShutdown)
	}
	return w, nil
}

// workdir is where the shell starts: the workspace in a created pod, the
// container's own working directory in an existing one.
func (b *Backend) workdir() string {
	if b.cfg.created() {
		return b.cfg.MountPath
	}
	return ""
}

// openShell starts the shell's exec in pod (under the helper, where there
// is one) and the helper's control exec.
func (b *Backend) openShell(ctx context.Context, spec termapi.SpawnSpec, pod string) (*podLink, error) {
	l := &podLink{b: b, pod: pod, log: b.log}
	helper := b.helperPath()
	name := backendkit.SafeName(spec.SessionID) + "-" + randomHex(4)
	command := []string{b.cfg.Shell, "-c", b.shellLine(spec)}
	if helper != "" {
		command = append([]string{helper, "shell", name, "--"}, command...)
	}
	container, err := b.containerOf(ctx, pod)
	if err != nil {
		return nil, err
	}
	l.files = inband.NewFarFiles(func(ctx context.Context, argv []string, stdin []byte) (inband.FarResult, error) {
		return b.runInPod(ctx, pod, container, argv, stdin)
	})
	size := spec.Policy.Size.Or(termapi.DefaultSize)
	l.shell, err = b.startExec(ctx, execSpec{pod: pod, container: container, command: command, tty: true, size: size})
	if err != nil {
		return nil, fmt.Errorf("%w: pod %s: %v", ErrShell, pod, err)
	}
	if helper != "" {
		st, err := b.startExec(ctx, execSpec{pod: pod, container: container, command: []string{helper, "control", name}})
		if err != nil {
			l.shell.Close()
			return nil, fmt.Errorf("%w: pod %s: the helper's control exec: %v", ErrShell, pod, err)
		}
		l.ctrl = newControl(st)
	}
	return l, nil
}

// shellLine is what `bash -c` runs: the session's environment, then the
// interactive shell in its place.
func (b *Backend) shellLine(spec termapi.SpawnSpec) string {
	env := map[string]string{
		"TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat", "DSH_SHELL": "1",
		"DSH_SESSION_ID": spec.OwnerID, "DSH_PTY_SESSION_ID": spec.SessionID,
	}
	if !b.cfg.created() {
		// A created pod has them in its container's environment already.
		maps.Copy(env, b.cfg.Env)
	}
	var line strings.Builder
	for _, k := range slices.Sorted(maps.Keys(env)) {
		line.WriteString("export " + k + "=" + shellQuote(env[k]) + "; ")
	}
	line.WriteString("exec " + shellQuote(b.cfg.Shell) + " --noediting --noprofile --norc -i")
	return line.String()
}

// shellQuote quotes s for bash, in single quotes.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// helperPath is the helper's path in the shell's container, or empty
// without one.
func (b *Backend) helperPath() string {
	switch {
	case b.cfg.HelperPath != "":
		return b.cfg.HelperPath
	case b.cfg.HelperImage != "":
		return defaultHelperPath
	}
	return ""
}

// Close closes every live session (deleting the pods it created), stops
// the warm pool and gives up the lease, and makes later spawns fail.
func (b *Backend) Close(ctx context.Context) error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	errs := []error{b.sessions.Close(ctx, "backend closed")}
	if b.pool != nil {
		errs = append(errs, b.pool.close(ctx))
	}
	if b.lease != nil {
		errs = append(errs, b.lease.close(ctx))
	}
	return errors.Join(errs...)
}

// List describes the backend's open sessions.
func (b *Backend) List(context.Context) ([]termapi.Info, error) {
	return backendkit.List(&b.sessions), nil
}

// Attach returns the open session id, as its spawn returned it.
func (b *Backend) Attach(_ context.Context, id string) (termapi.Session, error) {
	return backendkit.Find(&b.sessions, id)
}

// quietClientGo silences client-go's own log (klog): an exec closed from
// this side makes its stream copiers report "use of closed network
// connection", which is how a close looks, not a fault; what does fail
// reaches the backend as an error.
var quietClientGo = sync.OnceFunc(func() { klog.SetLogger(logr.Discard()) })

func randomHex(n int) string {
	buf := make([]byte, n)
	rand.Read(buf)
	return hex.EncodeToString(buf)
}

// hostname names this machine in the lease, for people reading it.
func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return h
}

var _ termapi.Backend = (*Backend)(nil)
