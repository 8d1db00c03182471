package backendplugin

import "github.com/dshdev/dsh/plugins/terminal/termapi"

// ServeVersion serves as Serve does, under another protocol version: a
// plugin built for a future protocol, for the version check.
func ServeVersion(version uint, nb NewBackend) {
	handshake.ProtocolVersion = version
	Serve(nb)
}

// ProcessID is the pid of the plugin process c runs now.
func ProcessID(c *Client) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proc.pid
}

// ResultRoundTrip sends r through the protocol's conversion both ways.
func ResultRoundTrip(r termapi.SendResult) termapi.SendResult { return resultFromPB(resultToPB(r)) }

// FromStatus is fromStatus, for the mapping of gRPC codes.
var FromStatus = fromStatus
