package bashtool_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/dshdev/dsh/plugins/terminal"
)

func TestMain(m *testing.M) {
	terminal.RegisterExternal() // for DSH_TEST_BACKEND
	goleak.VerifyTestMain(m)
}
