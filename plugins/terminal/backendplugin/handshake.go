package backendplugin

import (
	"github.com/hashicorp/go-plugin"
)

// ProtocolVersion is the version of the protocol (backend.proto) this
// package speaks. A plugin built for another version is refused at the
// handshake, before any call.
const ProtocolVersion = 2

// handshake is what host and plugin check before they talk. The cookie is
// not a secret: it only keeps a backend executable started by hand from
// waiting for a host that is not there, and it never changes.
var handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "DSH_BACKEND_PLUGIN",
	MagicCookieValue: "7c1f6d0e4b9a2f35-dsh-terminal-backend",
}

// pluginName is the one plugin a backend executable serves.
const pluginName = "backend"

// maxMessageBytes bounds one message either way. Output arrives in the
// chunks a send's Output call returns, which may be large for a command
// that printed a lot between two pulls.
const maxMessageBytes = 256 << 20
