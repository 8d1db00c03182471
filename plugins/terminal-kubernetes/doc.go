// Package terminalkubernetes is the "kubernetes" terminal backend: an
// interactive bash per session, in a Kubernetes pod, through the Kubernetes
// API (client-go). Its sessions are inband.Sessions, so the bash tool runs
// on them. cmd/dsh-backend-kubernetes serves it out of process, which keeps
// client-go out of dsh itself.
//
// # Pods
//
// With Image or PodTemplate, every owner gets a pod of its own, created at
// its first session and deleted (with GracePeriodSeconds) when its last
// session closes. The pod starts from the template and gets dsh's labels
// (app.kubernetes.io/managed-by=dsh, dsh.dev/identity, dsh.dev/instance,
// dsh.dev/owner, dsh.dev/session), restartPolicy Never, and safe defaults
// for what the template leaves unset: runAsUser and runAsGroup 1000 with
// runAsNonRoot, no privilege, no privilege escalation, every capability
// dropped, the runtime's default seccomp profile, no service-account token,
// no service links, a memory limit of 2Gi (Memory) and small requests. The
// shell container's own process is the helper's `hold` (or, without the
// helper, a bash reading a stdin nobody writes); each shell is an exec
// beside it.
//
// With Pod or PodSelector, sessions are execs into pods someone else
// manages, which are never deleted.
//
// # The workspace
//
// The workspace is a volume mounted at MountPath (default /workspace),
// where the shell starts: an emptyDir per pod, gone with the pod, or, with
// WorkspaceClaim, the owner's directory (subPath) on that
// PersistentVolumeClaim, kept across pods.
//
// # The shell and the helper
//
// Each shell is one interactive exec with a TTY, kept open for the
// session's life (WebSocket, SPDY where the API server does not upgrade),
// running `bash --noediting --noprofile --norc -i` under the in-band
// engine's protocol: exit codes, exit and reset, interrupts and timeouts.
// With HelperImage, an init container copies the pod helper
// (cmd/dsh-kube-helper, package podhelper) into the pod; the shell runs as
// the helper's child, and a second exec without a TTY talks to it. From
// /proc in the pod's pid namespace it gives the stdin proof (the
// foreground job blocks reading the terminal), delivers SIGTERM, SIGKILL,
// SIGHUP and SIGCONT to the foreground group, and at close ends every
// process the shell started. Without the helper, a program waiting for
// input is inferred from silence, and only the signals a terminal has a
// character for work.
//
// # Cleanup
//
// Each backend holds a Lease (coordination.k8s.io) named after its
// identity and instance, renewed every third of LeaseSeconds. At load and
// at every renewal it deletes the pods of its identity whose instance's
// lease is gone or has not been renewed for a whole LeaseSeconds: a dsh
// killed with SIGKILL leaves its pods for at most about that long once
// another dsh of the same identity runs. With Parent, every created pod
// also has an owner reference to that object, so that the cluster's
// garbage collector deletes the pods with it.
//
// # Failures
//
// A pod deleted, evicted or failed under a running shell, and an exec
// whose connection to the API server breaks, end the session as a shell
// exit whose status says why (Status.Lost). A pod that does not start
// fails the spawn with its last state and its latest warning events
// (FailedCreatePodSandBox, FailedMount, ErrImageNeverPull).
//
// # Rights
//
// In its namespace the backend needs pods: create, get, list, delete,
// patch; pods/exec: create, get; events: list; leases: create, get, list,
// update, delete. deployments/kubernetes/rbac.yaml grants them.
package terminalkubernetes
