package terminalssh

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// savedNotice finds the path a clipped result names for the full output.
var savedNotice = regexp.MustCompile(`\[full output: (\S+)\]$`)

// TestSavedOutputOnTheRemoteHost: a clipped result names a file the
// remote shell reads with the model's next command. The server here does
// not see dsh's private directory (it is hidden in the server's mount
// namespace), as another host would not: the file is written there
// through the backend, byte for byte, and removed with the session.
func TestSavedOutputOnTheRemoteHost(t *testing.T) {
	private := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", private)
	srv := newServerHiding(t, private)
	h := loadSSHTool(t, srv, "{backendType: ssh, timeoutMs: 60000, maxOutputChars: 2000}")
	call := toolCaller(t, h)
	got := call("seq 1 100000")
	m := savedNotice.FindStringSubmatch(got)
	if m == nil || !strings.HasPrefix(got, "1\n2\n") || !strings.Contains(got, "\n100000\n") {
		t.Fatalf("clipped output: %q … %q", got[:min(40, len(got))], got[max(0, len(got)-200):])
	}
	path := m[1]
	if !strings.Contains(got, "the full output (100000 lines) is in "+path) {
		t.Fatalf("the clipping notice does not name %s: %q", path, got[max(0, len(got)-400):])
	}
	if got := call("sed -n 50000p " + path); got != "50000" {
		t.Fatalf("sed -n 50000p on the remote host: %q", got)
	}
	if got := call("wc -l < " + path + "; tail -n 1 " + path + "; stat -c %a " + path); got != "100000\n100000\n600" {
		t.Fatalf("the remote copy: %q, want all 100000 lines, private to its user", got)
	}
	dir := path[:strings.LastIndexByte(path, '/')]
	// The server's /tmp is this machine's: the session's files go with it.
	if err := h.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the session's files at %s after it closed: %v", dir, err)
	}
}

// TestSavedOutputBoundsOnTheRemoteHost: the copies on the remote host stay
// within dsh's bounds: when an older saved output is removed here to make
// room for a new one (maxSavedBytesPerOwner), its copy goes too.
func TestSavedOutputBoundsOnTheRemoteHost(t *testing.T) {
	private := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", private)
	srv := newServerHiding(t, private)
	h := loadSSHTool(t, srv, "{backendType: ssh, timeoutMs: 60000, maxOutputChars: 2000, maxSavedBytes: 700000, maxSavedBytesPerOwner: 1000000}")
	call := toolCaller(t, h)
	var paths []string
	for range 2 {
		got := call("seq 1 100000") // 588895 bytes: two are more than the owner may keep
		m := savedNotice.FindStringSubmatch(got)
		if m == nil {
			t.Fatalf("clipped output: %q", got[max(0, len(got)-200):])
		}
		paths = append(paths, m[1])
	}
	if paths[0] == paths[1] {
		t.Fatalf("both results name %s", paths[0])
	}
	if got := call("test -e " + paths[0] + " && echo kept || echo gone; wc -l < " + paths[1]); got != "gone\n100000" {
		t.Fatalf("the older copy (%s) and the newer (%s): %q, want the older gone and the newer whole", paths[0], paths[1], got)
	}
}
