//go:build !linux

package dshcmd

// The command line serves shells of the Linux-only backend, watches its
// terminal with Linux ioctls and checks peers with SO_PEERCRED. Elsewhere
// the package holds only this import, so a build fails with the shell
// backend's one sentence saying why, not a page of undefined names.
import _ "github.com/dshdev/dsh/plugins/terminal-bash"
