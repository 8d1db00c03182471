package backendplugin

import (
	"context"
	"errors"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/dshdev/dsh/plugins/terminal/backendplugin/internal/backendpb"
	"github.com/dshdev/dsh/plugins/terminal/screen"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// send is a send in flight in the plugin. One goroutine receives its
// events; callers pull output that arrived, and ask for more when there is
// none (or, for a streaming send, keep one request ahead).
type send struct {
	session   *session
	stream    grpc.BidiStreamingClient[backendpb.SendControl, backendpb.SendEvent]
	stop      context.CancelFunc // ends the stream
	unwatch   func() bool        // stops cancelling on the caller's ctx
	streaming bool               // the caller drains Output (SendRequest.Stream)
	exec      bool               // an Exec, not typed text

	sendMu sync.Mutex // the stream's send side is not safe for concurrent use

	// answersCancel: the plugin answers a Cancel (Started.answers_cancel).
	answersCancel bool
	cancelMu      sync.Mutex    // one Cancel waits for its answer at a time
	answers       chan bool     // Cancel's answers, from receive
	ended         chan struct{} // closed when receive returns

	mu      sync.Mutex
	chunks  []string // output received, not yet returned by Output
	pulling bool     // a Pull is on its way
	eof     bool     // no more output will come
	result  termapi.SendResult
	done    bool          // result holds how the send settled
	more    chan struct{} // wakes Output
	settled chan struct{} // closed once done
}

// control sends one control message; an error means the stream has ended,
// which receive learns about by itself.
func (sn *send) control(msg *backendpb.SendControl) {
	sn.sendMu.Lock()
	defer sn.sendMu.Unlock()
	_ = sn.stream.Send(msg)
}

// pullLocked reports whether to ask for the next output now, and counts
// the request as made: not while one is on its way, nor once the send has
// settled (the plugin then sends the rest by itself). The caller sends it
// with pull after unlocking.
func (sn *send) pullLocked() bool {
	if sn.pulling || sn.done || sn.eof {
		return false
	}
	sn.pulling = true
	return true
}

var pullMsg = &backendpb.SendControl{Control: &backendpb.SendControl_Pull{Pull: &backendpb.Pull{}}}

func (sn *send) pull(want bool) {
	if want {
		sn.control(pullMsg)
	}
}

// receive takes the send's events until its stream ends.
func (sn *send) receive() {
	defer close(sn.ended)
	defer sn.stop()
	for {
		ev, err := sn.stream.Recv()
		if err != nil {
			sn.broken(err)
			return
		}
		want := false
		sn.mu.Lock()
		switch {
		case ev.GetOutput() != nil:
			out := ev.GetOutput()
			sn.pulling = false
			if len(out.GetText()) > 0 {
				sn.chunks = append(sn.chunks, string(out.GetText()))
			}
			if out.GetEof() {
				sn.eof = true
			} else if sn.streaming && len(sn.chunks) < 2 {
				want = sn.pullLocked()
			}
		case ev.GetResult() != nil:
			sn.settleLocked(resultFromPB(ev.GetResult()))
		case ev.GetCancelAnswer() != nil:
			select {
			case sn.answers <- ev.GetCancelAnswer().GetInterrupted():
			default: // no Cancel waits for it any more
			}
		}
		sn.notify()
		sn.mu.Unlock()
		sn.pull(want)
	}
}

// settleLocked records how the send settled. The viewport is the plugin's
// plus what arrived here and Output has not returned, which the plugin
// counts as returned.
func (sn *send) settleLocked(res termapi.SendResult) {
	if sn.done {
		return
	}
	if len(sn.chunks) > 0 {
		// Not cut to a limit: the plugin's viewport already is, and these
		// chunks are output the caller will still pull.
		res.Viewport = screen.Viewport(strings.Join(sn.chunks, ""), res.Viewport, math.MaxInt)
	}
	sn.result, sn.done = res, true
	close(sn.settled)
	if sn.unwatch != nil {
		sn.unwatch()
	}
}

// broken ends a send whose stream ended before its end of output: the
// plugin process died, or the plugin failed the send. Either way the
// shell is out of reach, which is what a shell exit means to the caller
// (the bash tool resets the session). A plugin that is unreachable is
// killed, so that it is surely gone and the next spawn starts it again.
func (sn *send) broken(err error) {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if sn.eof && sn.done {
		return
	}
	if errors.Is(fromStatus("send", err), ErrPluginExited) || sn.session.proc.exited() {
		sn.session.gone()
		sn.session.proc.lose()
	}
	sn.settleLocked(sn.lostResult())
	sn.eof = true
	sn.notify()
}

// lostResult is how a send ends when its plugin is out of reach. An Exec's
// command counts as started: it may have run, and must not be run again.
func (sn *send) lostResult() termapi.SendResult {
	res := termapi.SendResult{Reason: termapi.WaitSessionExit, Status: goneStatus(sn.session.proc)}
	if sn.exec {
		res.Exec = &termapi.ExecResult{State: termapi.ExecRunning, ExitCode: -1}
	}
	return res
}

func (sn *send) notify() {
	select {
	case sn.more <- struct{}{}:
	default:
	}
}

func (sn *send) Output(ctx context.Context) (string, error) {
	for {
		sn.mu.Lock()
		if len(sn.chunks) > 0 {
			out := sn.chunks[0]
			sn.chunks[0] = ""
			sn.chunks = sn.chunks[1:]
			want := sn.streaming && sn.pullLocked()
			sn.mu.Unlock()
			sn.pull(want)
			return out, nil
		}
		if sn.eof {
			sn.mu.Unlock()
			return "", io.EOF
		}
		want := sn.pullLocked()
		sn.mu.Unlock()
		sn.pull(want)
		select {
		case <-sn.more:
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
	}
}

func (sn *send) Wait(ctx context.Context) (termapi.SendResult, error) {
	select {
	case <-sn.settled:
	case <-ctx.Done():
		return termapi.SendResult{}, context.Cause(ctx)
	}
	sn.mu.Lock()
	defer sn.mu.Unlock()
	return sn.result, nil
}

var cancelMsg = &backendpb.SendControl{Control: &backendpb.SendControl_Cancel{Cancel: &backendpb.Cancel{}}}

// Cancel asks the plugin to cancel the send and returns its answer: the
// send may have settled there (a proven wait for input) while its result
// is still on the way, and a caller that took such a Cancel as done would
// leave the program reading. A plugin that does not answer within the
// call timeout is a suspect, and its Cancel counts as done.
func (sn *send) Cancel() bool {
	sn.mu.Lock()
	done := sn.done
	sn.mu.Unlock()
	if done {
		return false
	}
	if !sn.answersCancel {
		sn.control(cancelMsg) // a plugin built before the answer
		return true
	}
	sn.cancelMu.Lock()
	defer sn.cancelMu.Unlock()
	select {
	case <-sn.answers: // the answer to a Cancel that gave up waiting
	default:
	}
	sn.control(cancelMsg)
	timer := time.NewTimer(sn.session.proc.opts.CallTimeout)
	defer timer.Stop()
	select {
	case interrupted := <-sn.answers:
		return interrupted
	case <-sn.ended:
		// The plugin ended the stream before it read the Cancel: the send
		// had settled there, or the plugin is gone and the send with it.
		return false
	case <-timer.C:
		sn.session.proc.suspect()
		return true
	}
}

var _ termapi.Send = (*send)(nil)
