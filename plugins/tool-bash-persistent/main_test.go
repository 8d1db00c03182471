package bashtool_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/dshdev/dsh/plugins/terminal/backendplugin"
)

func TestMain(m *testing.M) {
	backendplugin.Register() // for DSH_TEST_BACKEND
	goleak.VerifyTestMain(m)
}
