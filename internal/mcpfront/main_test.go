package mcpfront

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// noFastPath runs the suite with the stdio fast path off, as
// dsh serve --mcp-fast-path=false does: DSH_MCP_FAST_PATH=false.
var noFastPath = os.Getenv("DSH_MCP_FAST_PATH") == "false"
