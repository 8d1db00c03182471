//go:build !linux

package terminalbash

// The shell backend proves what the terminal waits for from /proc, reaps
// shells through pidfds and contains them in cgroups: Linux only. This
// declaration makes a build elsewhere fail with that sentence instead of a
// page of undefined names.
const _ int = "dsh's shell backend (plugins/terminal-bash) runs on Linux only: it reads /proc and uses pidfds, PTYs and cgroups"
