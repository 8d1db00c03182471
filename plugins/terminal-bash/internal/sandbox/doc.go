// Package sandbox confines a shell with the kernel, never with path checks
// in Go: Landlock limits what the shell and everything it starts may write
// (and, from Landlock ABI 6, whom they may signal and which abstract
// sockets they may reach); a mount namespace makes everything else
// read-only (no chmod, chown, utimes or xattr outside the writable paths,
// which Landlock has no right for), keeps git hooks and config read-only,
// hides dsh's private directory and gives the shell a devpts of its own; a
// user namespace in which the shell keeps no capability takes away dsh's
// (root's, say); a network namespace of its own, with only a loopback
// interface, takes away the network, and a seccomp filter the unix
// sockets that are reached through the file system.
//
// # How a shell is confined
//
// A Landlock domain applies to the thread that asks for it and to what
// that thread executes, so dsh cannot confine a child it starts with
// os/exec. Wrap makes the child run this same executable again
// (/proc/self/exe) under the name HelperName; this package's init
// function recognises that name before main runs, confines its own
// thread, and executes the shell in its place. The shell keeps the pid
// (and start time) the parent saw at fork, so the parent's process
// identity, cgroup and /proc proofs are unaffected.
//
// Every binary that links this package (dsh, dsh-backend-bash, the tests
// of the packages that use it) therefore doubles as the helper.
//
// # What the kernel must offer
//
// Check runs the helper once without a shell, with the policy's
// namespaces, mounts and filter, and reports the Landlock ABI it found. A
// policy the kernel cannot enforce (Landlock below ABI 3, user, mount or
// network namespaces refused, no mount_setattr, no seccomp) is an error
// naming what is missing; a mode is never downgraded in silence. Above ABI 3 Landlock is used in best-effort mode:
// the rights a newer kernel adds (device ioctls, signal scoping) are used
// where present and the effective ABI is reported.
package sandbox
