//go:build linux

package backendplugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/dshdev/dsh/plugins/terminal/backendplugin/internal/backendpb"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// A keeper's send works as any plugin's while its host reads it, except
// that every line the host gets is also written to the unit's journal.
// When the host goes away before the end, the keeper reads on itself into
// the journal (a pump), and starts further sends while the unit's command
// runs; so a send goes on without its host, and nothing it prints is lost.
// The next host takes the unit over with Resume: the journal from the
// unit's start, then the live send, or the end the unit came to.
//
// The sends of one unit of work (an Exec and the empty sends that wait for
// the rest of its command, or a typed send) share one journal, from the
// unit's start. A unit is delivered once a host has received its end and
// all its output; until then a new host must Resume it before it starts
// anything else (termapi.ErrUnresumed), so that its end is not buried.

// drainBound bounds each send the keeper starts to read a unit on with no
// host; it starts another when one ends before the unit.
const drainBound = time.Minute

// unit is the work a host started last on a session. Guarded by its
// kept's mu.
type unit struct {
	command string // the Exec's command; empty for typed text
	exec    bool
	log     *journal
	// host is the connection the unit belongs to (the one that started or
	// resumed it); 0 once that host went away.
	host uint64
	// streaming: a host's stream holds the unit's backend send now;
	// streamed is closed when that stream lets go.
	streaming bool
	streamed  chan struct{}
	cur       *bsend // the backend send not yet read to its end
	res       *termapi.SendResult
	final     bool // the unit has ended; res says how
	delivered bool // a host received its end
}

// bsend is one backend send of a unit.
type bsend struct {
	sn      termapi.Send
	settled chan struct{} // closed once sn has settled; res is set then
	res     termapi.SendResult
	drained bool // its output has been read to the end (io.EOF)
	// stopPump ends the keeper's reading, when it reads; pumped is closed
	// once it has stopped.
	stopPump context.CancelFunc
	pumped   chan struct{}
}

// ends reports whether a send that settled with res ends the unit.
func (u *unit) ends(res termapi.SendResult) bool {
	switch {
	case res.Reason == termapi.WaitSessionExit || res.Status.Exited:
		return true
	case !u.exec:
		return true
	case res.Prompt:
		return true
	}
	return res.Exec != nil && (res.Exec.State == termapi.ExecCompleted || res.Exec.State == termapi.ExecAbandoned)
}

// drainable reports whether a unit whose send settled with res, without
// ending it, is worth another send with no host to read it: not when a
// program waits for input (only a host can answer that).
func drainable(res termapi.SendResult) bool { return res.Reason != termapi.WaitStdinRead }

// newBsend makes sn the unit's current send and records how it settles.
// The caller holds s.mu.
func (k *keeping) newBsend(s *kept, u *unit, sn termapi.Send) *bsend {
	b := &bsend{sn: sn, settled: make(chan struct{})}
	u.cur = b
	go func() {
		res, err := sn.Wait(k.lifetime)
		if err != nil {
			// The keeper is stopping, and ends the session with it.
			res = termapi.SendResult{Reason: termapi.WaitSessionExit, Status: s.sess.Status()}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		b.res = res
		u.res = &b.res
		u.final = u.ends(res)
		close(b.settled)
	}()
	return b
}

// pumpLocked has the keeper read b into the unit's journal, since no
// host's stream does. The caller holds s.mu.
func (k *keeping) pumpLocked(s *kept, u *unit, b *bsend) {
	if b.drained || b.stopPump != nil {
		return
	}
	ctx, stop := context.WithCancel(k.lifetime)
	b.stopPump, b.pumped = stop, make(chan struct{})
	go k.pump(ctx, s, u, b)
}

// pump reads b to its end into the unit's journal; then, with no host,
// goes on with another send while the unit has not ended. It stops early
// when a host takes b over (ctx).
func (k *keeping) pump(ctx context.Context, s *kept, u *unit, b *bsend) {
	defer close(b.pumped)
	for {
		text, err := b.sn.Output(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return // taken over, or the keeper is stopping
		}
		s.mu.Lock()
		u.log.Write([]byte(text))
		s.mu.Unlock()
	}
	<-b.settled // Output ends once the send has settled
	s.mu.Lock()
	defer s.mu.Unlock()
	b.drained = true
	b.stopPump = nil
	if u.cur == b {
		u.cur = nil
	}
	if u.host == 0 && !u.final && drainable(b.res) {
		k.drain(s, u)
	}
}

// drain reads on a unit whose host has gone, with an empty send. The
// caller holds s.mu.
func (k *keeping) drain(s *kept, u *unit) {
	if k.lifetime.Err() != nil {
		return
	}
	sn, err := s.sess.StartSend(k.lifetime, termapi.SendRequest{Stream: true, Timeout: drainBound})
	if err != nil {
		k.log.Warn("reading on a unit without its host failed", "session", s.id, "err", err)
		return
	}
	k.pumpLocked(s, u, k.newBsend(s, u, sn))
}

// orphan is a unit's host going away: the keeper reads on. The caller
// holds s.mu.
func (u *unit) orphan(k *keeping, s *kept, conn uint64) {
	if u.host != conn || u.delivered {
		return
	}
	u.host = 0
	switch {
	case u.streaming:
		// The stream's own end hands its send to a pump.
	case u.cur != nil:
		k.pumpLocked(s, u, u.cur)
	case !u.final && u.res != nil && drainable(*u.res):
		k.drain(s, u)
	}
}

// gapNote stands in a unit's output for what its journal dropped.
func gapNote(n int64) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf("[... %d bytes of output were dropped here: dsh was away, and the keeper keeps the first and the last %d MiB ...]\n", n, DefaultKeptOutput>>21)
}

// send serves a host's send on a kept session: a new unit, more of the
// unit the host is on, or (Resume) the unit a host lost.
func (k *keeping) send(stream grpc.BidiStreamingServer[backendpb.SendControl, backendpb.SendEvent], start *backendpb.SendStart) error {
	ctx := stream.Context()
	conn := connOf(ctx)
	s, err := k.held(conn, start.GetSessionId())
	if err != nil {
		return toStatus(err)
	}
	timeout := time.Duration(start.GetTimeoutNs())
	s.mu.Lock()
	for {
		// A host may start its next send once it has the result of the
		// last, while the last's stream still sends it the rest: that
		// rest comes first.
		last := s.unit
		if last == nil || !last.streaming || last.host != conn || last.cur == nil || !isClosed(last.cur.settled) {
			break
		}
		wait := last.streamed
		s.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return toStatus(context.Cause(ctx))
		}
		s.mu.Lock()
	}
	u, b, bg, err := k.begin(s, conn, start, timeout)
	if err != nil {
		s.mu.Unlock()
		return toStatus(err)
	}
	u.streaming, u.streamed = true, make(chan struct{})
	var stopPump context.CancelFunc
	var pumped chan struct{}
	if b != nil {
		stopPump, pumped = b.stopPump, b.pumped
	}
	s.mu.Unlock()
	// Whatever way this stream ends, a send it has not read to its end is
	// the keeper's to read.
	released := false
	release := func(deliver bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if released {
			return
		}
		released = true
		u.streaming = false
		close(u.streamed)
		if b != nil && !b.drained {
			k.pumpLocked(s, u, b)
		}
		if deliver && u.final && (b == nil || b.drained) {
			u.delivered = true
			u.log.Remove()
		}
		if deliver && bg.taken {
			s.bg.Remove()
			s.bgDropped = false
		}
	}
	defer release(false)
	if stopPump != nil {
		// A resumed send the keeper was reading: it stops, and this
		// stream reads on from where it stopped.
		stopPump()
		<-pumped
		s.mu.Lock()
		b.stopPump = nil
		s.mu.Unlock()
	}

	// Events go from here and from the reader below (a Cancel's answer):
	// one at a time.
	var sendMu sync.Mutex
	sendEvent := func(ev *backendpb.SendEvent) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(ev)
	}
	if err := sendEvent(&backendpb.SendEvent{Event: &backendpb.SendEvent_Started{Started: &backendpb.Started{AnswersCancel: true}}}); err != nil {
		return err
	}
	pulls := make(chan struct{}, 1)
	var (
		credit int
		mu     sync.Mutex
	)
	go func() {
		for {
			msg, err := stream.Recv()
			if err != nil {
				return
			}
			switch {
			case msg.GetPull() != nil:
				mu.Lock()
				credit++
				mu.Unlock()
				select {
				case pulls <- struct{}{}:
				default:
				}
			case msg.GetCancel() != nil:
				// A host that let the session go cancels nothing: the
				// command is the keeper's to read for the next host.
				// The answer tells the host whether the command was
				// interrupted (see server.send).
				s.mu.Lock()
				mine := u.host == conn
				s.mu.Unlock()
				interrupted := false
				if b != nil && mine {
					interrupted = b.sn.Cancel()
				}
				_ = sendEvent(&backendpb.SendEvent{Event: &backendpb.SendEvent_CancelAnswer{CancelAnswer: &backendpb.CancelAnswer{Interrupted: interrupted}}})
			}
		}
	}()
	take := func() bool {
		mu.Lock()
		defer mu.Unlock()
		if credit == 0 {
			return false
		}
		credit--
		return true
	}
	sendOutput := func(text []byte, eof bool) error {
		return sendEvent(&backendpb.SendEvent{Event: &backendpb.SendEvent_Output{Output: &backendpb.Output{Text: text, Eof: eof}}})
	}
	// What goes before the live send: the background output kept while
	// no host held the session (a typed send's), then, for a resumed
	// unit, its journal from the start.
	var queued [][]byte
	if len(bg.text) > 0 && !start.GetExec() {
		queued = append(queued, bg.text)
	}
	if start.GetResume() {
		s.mu.Lock()
		replay, rerr := readJournal(u.log)
		s.mu.Unlock()
		if rerr != nil {
			k.log.Warn("reading a unit's journal failed", "session", s.id, "err", rerr)
		}
		for len(replay) > 0 {
			n := min(len(replay), maxChunk)
			queued = append(queued, replay[:n])
			replay = replay[n:]
		}
	}
	// pull reads the live send's next output into the journal.
	pull := func(ctx context.Context) ([]byte, error) {
		text, err := b.sn.Output(ctx)
		if errors.Is(err, io.EOF) {
			s.mu.Lock()
			b.drained = true
			if u.cur == b {
				u.cur = nil
			}
			s.mu.Unlock()
			return nil, err
		}
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		u.log.Write([]byte(text))
		s.mu.Unlock()
		return []byte(text), nil
	}

	settled := closedChan
	if b != nil {
		settled = b.settled
	}
pulling:
	for {
		for take() {
			if len(queued) > 0 {
				if err := sendOutput(queued[0], false); err != nil {
					return err
				}
				queued = queued[1:]
				continue
			}
			if b == nil {
				break pulling
			}
			out, err := pull(ctx)
			if errors.Is(err, io.EOF) {
				break pulling
			}
			if err != nil {
				return toStatus(err)
			}
			if err := sendOutput(out, false); err != nil {
				return err
			}
		}
		select {
		case <-pulls:
		case <-settled:
			break pulling
		case <-ctx.Done():
			return toStatus(context.Cause(ctx))
		}
	}
	if b != nil {
		<-b.settled
	}

	s.mu.Lock()
	var res termapi.SendResult
	if b != nil {
		res = b.res
	} else {
		// A unit that ended while no host held it: its journal is all its
		// output, and the viewport keeps only the line being written.
		res = *u.res
		res.Viewport = res.Viewport[strings.LastIndexByte(res.Viewport, '\n')+1:]
	}
	s.mu.Unlock()
	if x := res.Exec; x != nil && start.GetExec() && bg.taken {
		x2 := *x
		x2.Background = string(bg.text) + x2.Background
		x2.BackgroundTruncated = x2.BackgroundTruncated || bg.dropped
		res.Exec = &x2
	}
	if err := sendEvent(&backendpb.SendEvent{Event: &backendpb.SendEvent_Result{Result: resultToPB(res)}}); err != nil {
		return err
	}
	// What is left is bounded now that the send has settled: all of it
	// goes, so that the stream can end.
	for _, q := range queued {
		if err := sendOutput(q, false); err != nil {
			return err
		}
	}
	for b != nil {
		out, err := pull(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return toStatus(err)
		}
		if err := sendOutput(out, false); err != nil {
			return err
		}
	}
	// The host has it all: the unit is delivered when this was its end,
	// and the background output it carried is too. That is settled before
	// the end of output goes, after which the host may start its next send.
	release(true)
	return sendOutput(nil, true)
}

// closedChan stands for the end of a send that ended before its stream.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// handover is the background output a send hands to its host first.
type handover struct {
	text    []byte
	dropped bool
	taken   bool // the send carries it: the journal goes once delivered
}

// begin decides what a send is on a kept session and starts its backend
// send: b is nil for a resumed unit that has ended already (its end is
// u.res). The caller holds s.mu.
func (k *keeping) begin(s *kept, conn uint64, start *backendpb.SendStart, timeout time.Duration) (u *unit, b *bsend, bg handover, err error) {
	u = s.unit
	lost := u != nil && !u.delivered
	switch {
	case start.GetResume():
		if !lost {
			return nil, nil, bg, fmt.Errorf("%w on session %s", termapi.ErrNoUnit, s.id)
		}
		if u.streaming || (u.host != 0 && u.host != conn) {
			return nil, nil, bg, fmt.Errorf("%w (a host is reading it)", termapi.ErrSendActive)
		}
		u.host = conn
		switch {
		case u.cur != nil:
			b = u.cur
		case !u.final:
			sn, err := s.sess.StartSend(k.lifetime, termapi.SendRequest{Stream: true, Timeout: timeout})
			if err != nil {
				return nil, nil, bg, err
			}
			b = k.newBsend(s, u, sn)
		}
		return u, b, bg, nil
	case lost && u.host != conn:
		return nil, nil, bg, fmt.Errorf("session %s: %w", s.id, termapi.ErrUnresumed)
	case lost && (u.streaming || u.cur != nil):
		return nil, nil, bg, fmt.Errorf("%w (the previous send is still being read)", termapi.ErrSendActive)
	case lost && !u.final && !start.GetExec():
		// More of the same unit: a wait for the rest of its command, or
		// text typed into the program it runs.
		sn, err := s.sess.StartSend(k.lifetime, termapi.SendRequest{Text: string(start.GetText()), Submit: start.GetSubmit(), Timeout: timeout, Stream: start.GetStream()})
		if err != nil {
			return nil, nil, bg, err
		}
		return u, k.newBsend(s, u, sn), bg, nil
	}
	// A new unit.
	var sn termapi.Send
	if start.GetExec() {
		sn, err = s.sess.Exec(k.lifetime, termapi.ExecRequest{Command: string(start.GetCommand()), Timeout: timeout, Stream: start.GetStream()})
	} else {
		sn, err = s.sess.StartSend(k.lifetime, termapi.SendRequest{Text: string(start.GetText()), Submit: start.GetSubmit(), Timeout: timeout, Stream: start.GetStream()})
	}
	if err != nil {
		return nil, nil, bg, err
	}
	if u != nil && !u.streaming {
		u.log.Remove() // a stream that holds it removes it as it ends
	}
	s.units++
	u = &unit{
		command: string(start.GetCommand()),
		exec:    start.GetExec(),
		log:     newJournal(filepath.Join(k.paths.sessions(), fmt.Sprintf("%s.%d.out", safeFileName(s.id), s.units)), k.keptOutput),
		host:    conn,
	}
	s.unit = u
	if s.bg.Len() > 0 || s.bgDropped {
		text, rerr := readJournal(s.bg)
		if rerr != nil {
			k.log.Warn("reading a background journal failed", "session", s.id, "err", rerr)
		}
		bg = handover{text: text, dropped: s.bgDropped, taken: true}
	}
	return u, k.newBsend(s, u, sn), bg, nil
}

// readJournal reads all a journal keeps, with a note where it dropped
// bytes (at most its bound).
func readJournal(j *journal) ([]byte, error) {
	var out []byte
	for pos := int64(0); pos < j.Len(); {
		data, from, err := j.ReadFrom(pos, maxChunk)
		if err != nil {
			return out, err
		}
		out = append(out, gapNote(from-pos)...)
		out = append(out, data...)
		if len(data) == 0 {
			break
		}
		pos = from + int64(len(data))
	}
	return out, nil
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
