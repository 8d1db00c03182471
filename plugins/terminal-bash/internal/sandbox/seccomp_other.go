//go:build linux && !amd64 && !arm64

package sandbox

// No filter is built for this architecture: a policy that needs one fails
// its check, naming the architecture.
const (
	nativeArch   = 0
	foreignNRBit = 0
)

var modeCalls []modeCall
