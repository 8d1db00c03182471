//go:build !linux

package podhelper

import (
	"fmt"
	"os"
)

// Main fails: the helper runs in Linux pods only.
func Main([]string) int {
	fmt.Fprintln(os.Stderr, "dsh-kube-helper: Linux only")
	return 2
}
