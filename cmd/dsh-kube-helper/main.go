// Command dsh-kube-helper is the helper the kubernetes backend puts in a
// session's pod: the stdin proof, the signals a terminal has no character
// for, and the sweep of the shell's processes at close, from inside the
// pod's pid namespace (see plugins/terminal-kubernetes/podhelper). Build it
// static (CGO_ENABLED=0); cmd/dsh-kube-image puts it in an image whose init
// container copies it into the pod.
package main

import (
	"os"

	"github.com/dshdev/dsh/plugins/terminal-kubernetes/podhelper"
)

func main() { os.Exit(podhelper.Main(os.Args[1:])) }
