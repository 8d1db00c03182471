//go:build linux

package dshcmd

import (
	"context"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dshdev/dsh/host"
)

// statusLine is the REPL's line after each result.
var statusLine = regexp.MustCompile(`^\[[0-9.]+(µs|ms|s|m[0-9.]+s)(, error)?\]$`)

func TestReplPipe(t *testing.T) {
	deploy := writeFile(t, fakeDeployment)
	in := "ls\n\n   \nfail\nnonl\nsilent\r\nlast line without newline"
	var out, errOut strings.Builder
	code := run([]string{"repl", "-d", deploy}, strings.NewReader(in), &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	// stdout is exactly what the model saw, each result on its own lines.
	want := "ran: ls\nfailed on purpose\nno newline\nran: last line without newline\n"
	if out.String() != want {
		t.Fatalf("stdout %q, want %q", out.String(), want)
	}
	// stderr: one status line per call (blank lines are no calls), the
	// error result marked.
	lines := strings.Split(strings.TrimSuffix(errOut.String(), "\n"), "\n")
	wantErr := []bool{false, true, false, false, false}
	if len(lines) != len(wantErr) {
		t.Fatalf("stderr %q: want %d status lines", errOut.String(), len(wantErr))
	}
	for i, l := range lines {
		if !statusLine.MatchString(l) || strings.HasSuffix(l, ", error]") != wantErr[i] {
			t.Errorf("status line %d: %q (error result: %v)", i, l, wantErr[i])
		}
	}
}

// transcript follows what the REPL writes to its status stream.
type transcript struct {
	chunks chan string
	seen   string
}

func newTranscript(r io.Reader) *transcript {
	tr := &transcript{chunks: make(chan string)}
	go func() {
		defer close(tr.chunks)
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				tr.chunks <- string(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	return tr
}

// waitFor consumes the transcript up to and including the next want.
func (tr *transcript) waitFor(t *testing.T, want string) {
	t.Helper()
	for {
		if i := strings.Index(tr.seen, want); i >= 0 {
			tr.seen = tr.seen[i+len(want):]
			return
		}
		chunk, ok := <-tr.chunks
		if !ok {
			t.Fatalf("status stream ended waiting for %q (rest: %q)", want, tr.seen)
		}
		tr.seen += chunk
	}
}

func TestReplInterrupts(t *testing.T) {
	d, err := host.ParseDeployment("fake.yaml", []byte(fakeDeployment), nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Load(t.Context(), d)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	owner, err := h.NewOwner("repl-test", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	statusR, statusW := io.Pipe()
	var out syncBuffer
	interrupts := make(chan os.Signal)
	r := &repl{
		tools:       h.Tools(),
		owner:       owner,
		in:          inR,
		out:         &out,
		status:      statusW,
		interactive: true,
		interrupts:  interrupts,
	}
	done := make(chan struct{})
	go func() {
		r.run(t.Context())
		statusW.Close()
		close(done)
	}()
	tr := newTranscript(statusR)
	line := func(s string) {
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}

	tr.waitFor(t, "dsh$ ")
	// Ctrl-C during a call cancels that call; its error result is shown.
	line("block")
	recv(t, fakeStarted, "the call to start")
	interrupts <- syscall.SIGINT
	tr.waitFor(t, ", error]\n")
	tr.waitFor(t, "dsh$ ")
	// One Ctrl-C at the prompt only warns; a command disarms it.
	interrupts <- syscall.SIGINT
	tr.waitFor(t, "[Ctrl-C again or Ctrl-D to exit]\n")
	tr.waitFor(t, "dsh$ ")
	line("ls")
	tr.waitFor(t, "]\n")
	tr.waitFor(t, "dsh$ ")
	// Two in a row exit.
	interrupts <- syscall.SIGINT
	tr.waitFor(t, "dsh$ ")
	interrupts <- syscall.SIGINT
	recv(t, done, "the REPL to exit")
	inW.Close()
	for range tr.chunks {
	}
	if got, want := out.String(), "interrupted: context canceled\nran: ls\n"; got != want {
		t.Fatalf("stdout %q, want %q", got, want)
	}
}

// The shutdown budget starts when the REPL ends, however long it ran: the
// owner's cleanups (its shell's close) get all of it.
func TestReplCloseBudgetStartsAtExit(t *testing.T) {
	deploy := writeFile(t, fakeDeployment)
	// os/signal starts its watcher goroutine on first use; start it outside
	// the bubble, which it would never leave.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR2)
	signal.Stop(sigs)
	synctest.Test(t, func(t *testing.T) {
		inR, inW := io.Pipe()
		var out, errOut syncBuffer
		exit := make(chan int, 1)
		go func() { exit <- run([]string{"repl", "-d", deploy}, inR, &out, &errOut) }()
		if _, err := io.WriteString(inW, "owner-cleanup\n"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		// A session longer than the budget, in the bubble's fake time.
		time.Sleep(shutdownTimeout + time.Second)
		inW.Close()
		if code := <-exit; code != 0 {
			t.Fatalf("exit %d, stderr %q", code, errOut.String())
		}
	})
}
