package bashtool_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOwnOutputUnderBackgroundFlood: with a job printing without pause in
// the background, what a command prints is in its result, whole, and the
// job's output comes before it, under its header, clipped first (issue 27,
// item 7a: before, the command's own output was in none of ten results).
// Each command runs a while, so that the flood and the command print at
// the same time.
func TestOwnOutputUnderBackgroundFlood(t *testing.T) {
	if path := os.Getenv(externalBackend); path != "" && filepath.Base(path) != "dsh-backend-bash" {
		t.Skip("a backend on one terminal cannot tell a job's output from the command's")
	}
	t.Parallel()
	hs := newHarness(t, "", "")
	o := hs.owner(t, "flood")
	hs.run(t, o, "(while :; do echo flood-line; done) &")
	const calls = 10
	for i := range calls {
		own := fmt.Sprintf("OWN-OUTPUT-%d", i)
		got := hs.run(t, o, fmt.Sprintf("sleep 0.2; echo %s; seq 1 300; sleep 0.2", own))
		want := own + "\n" + seqLines(300)
		// The result's last line names the file with the job's whole output.
		if i := strings.LastIndex(got, "\n[output of background jobs: "); i >= 0 && strings.HasSuffix(got, ".txt]") {
			got = got[:i]
		}
		if got == want {
			// The job printed nothing the call saw (a loaded machine can
			// leave its reader behind): its lines come with a later result.
			continue
		}
		if !strings.HasSuffix(got, "\n"+want) || strings.Contains(got[strings.LastIndex(got, own):], "flood-line") {
			t.Fatalf("call %d: the command's own output is not whole at the end of its result:\n…%s", i, got[max(0, len(got)-3000):])
		}
		if strings.Count(got, "[Older output of background jobs was dropped") > 1 {
			t.Fatalf("call %d: the dropped notice comes more than once", i)
		}
		got = strings.TrimPrefix(got, "[Older output of background jobs was dropped; what follows is the newest.]\n")
		if !strings.HasPrefix(got, "[output from background jobs since the previous call]\n") {
			t.Fatalf("call %d: the job's output does not come first, under its header:\n%s", i, clip(got, 2000))
		}
	}
	hs.run(t, o, "kill %1; wait %1")
}

func seqLines(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if i > 1 {
			b.WriteByte('\n')
		}
		fmt.Fprint(&b, i)
	}
	return b.String()
}
