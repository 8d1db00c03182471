package bashtool_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dshdev/dsh/host"
	bashtool "github.com/dshdev/dsh/plugins/tool-bash-persistent"
)

// A tool whose reset forgets to let its shell go (a deliberately broken
// build) is caught by an invariant, on the very call that reset: the call
// fails loudly, naming the package and the invariant.
func TestInvariantCatchesAShellKeptAfterReset(t *testing.T) {
	hs := newHarness(t, "", "")
	o := hs.owner(t, "agent")
	hs.run(t, o, "true")
	restore := bashtool.KeepShellOnReset()
	defer restore()
	ctx := context.Background()
	res := hs.call(ctx, o, "exit 3")
	restore()
	if !res.IsError || !errors.Is(res.Err, host.ErrCheckFailed) || !strings.Contains(res.Text, `invariant violated by "github.com/dshdev/dsh/plugins/tool-bash-persistent": cached-shells-are-listed`) {
		t.Fatalf("the broken reset was not caught: %+v", res)
	}
	if v := hs.inv.TakeViolations(); len(v) == 0 || v[0].Name != "cached-shells-are-listed" {
		t.Fatalf("violations %v", v)
	}
}

// A shell the tool let go never becomes the owner's again.
func TestInvariantCatchesARetiredShellReadopted(t *testing.T) {
	hs := newHarness(t, "", "")
	o := hs.owner(t, "agent")
	hs.run(t, o, "true")
	bashtool.ReadoptRetiredShell(hs.h, o)
	res := hs.call(context.Background(), o, "true")
	if !res.IsError || !strings.Contains(res.Text, "retired-shells-stay-retired") {
		t.Fatalf("not caught: %+v", res)
	}
	hs.inv.TakeViolations()
	// The seeded state stays: the check at unload sees it too.
	unseed(t, hs, o)
}

// unseed puts the state back, so the harness's close is clean.
func unseed(t *testing.T, hs *harness, o *host.Owner) {
	t.Helper()
	hs.run(t, o, "exit 0") // a reset: the shell is let go properly
	hs.inv.TakeViolations()
}
