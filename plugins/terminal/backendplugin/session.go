package backendplugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dshdev/dsh/plugins/terminal/backendplugin/internal/backendpb"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// pluginGone is the status of a session whose plugin process is gone: the
// host cannot know how its shell ended.
var pluginGone = termapi.Status{Exited: true, ExitCode: -1}

// goneStatus is the status of a session of p once p is gone: pluginGone,
// with the reason the host killed p when it did.
func goneStatus(p *process) termapi.Status {
	st := pluginGone
	st.Lost = p.lostReason()
	return st
}

// session is a session of an external backend. What never changes (motd,
// pid) came with the spawn; the rest is asked for.
type session struct {
	proc *process
	id   string
	motd string
	pid  int
	// caps are what the plugin said the session can do.
	caps termapi.Capabilities

	mu       sync.Mutex
	dead     bool           // the plugin went away: the session has exited
	closed   bool           // Close succeeded: the plugin has forgotten the session
	detached bool           // Detach succeeded: the keeper holds it for another host
	final    termapi.Status // the status Close reported
}

func (s *session) Motd() string { return s.motd }
func (s *session) PID() int     { return s.pid }

// Capabilities are what the plugin reported for the session.
func (s *session) Capabilities() termapi.Capabilities { return s.caps }

// unsupported is the answer to a call the session's capabilities rule
// out, without asking the plugin.
func unsupported(what string) error {
	return fmt.Errorf("backendplugin: the session cannot %s: %w", what, errors.ErrUnsupported)
}

// gone records that the plugin no longer serves the session.
func (s *session) gone() {
	s.mu.Lock()
	s.dead = true
	s.mu.Unlock()
}

func (s *session) isDead() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dead || s.closed || s.detached || s.proc.exited()
}

// errGone is the error of a call on a session that is out of reach.
func (s *session) errGone() error {
	s.mu.Lock()
	closed, detached := s.closed, s.detached
	s.mu.Unlock()
	if closed {
		return fmt.Errorf("%w: the session was closed", termapi.ErrSessionExited)
	}
	if detached {
		return fmt.Errorf("%w: the session was let go to its keeper", termapi.ErrSessionClosing)
	}
	if why := s.proc.lostReason(); why != "" {
		return fmt.Errorf("%w: %w (%s)", termapi.ErrSessionExited, ErrPluginExited, why)
	}
	return fmt.Errorf("%w: %w", termapi.ErrSessionExited, ErrPluginExited)
}

// call derives the context of one call of the session from ctx, bounded by
// the plugin's call timeout.
func (s *session) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return s.proc.bound(ctx, s.proc.opts.CallTimeout)
}

// callErr is the error of a call under cctx (from call) that failed: a call
// that ran out of its bound says so, and makes the plugin a suspect.
func (s *session) callErr(cctx context.Context, op string, err error) error {
	if s.proc.timedOut(cctx) {
		return fmt.Errorf("backendplugin: %s: no answer within %s: %w", op, s.proc.opts.CallTimeout, errCallTimedOut)
	}
	return s.checkErr(fromStatus(op, err))
}

// checkErr notes what an error of a call says about the plugin.
func (s *session) checkErr(err error) error {
	if errors.Is(err, ErrPluginExited) || s.proc.exited() {
		s.gone()
		s.proc.lose()
		return fmt.Errorf("%w: %w", termapi.ErrSessionExited, err)
	}
	return err
}

func (s *session) Status() termapi.Status {
	s.mu.Lock()
	closed, final := s.closed, s.final
	s.mu.Unlock()
	if closed {
		return final
	}
	if s.isDead() {
		return goneStatus(s.proc)
	}
	ctx, cancel := s.call(context.Background())
	defer cancel()
	st, err := s.proc.rpc.Status(ctx, &backendpb.SessionRef{SessionId: s.id})
	if err != nil {
		if s.proc.timedOut(ctx) {
			// No answer is no news: the check it sets off decides.
			return termapi.Running
		}
		// Either the plugin is gone, or it lives and has forgotten the
		// session: the shell is out of reach both ways.
		_ = s.checkErr(fromStatus("status", err))
		return goneStatus(s.proc)
	}
	return statusFromPB(st)
}

func (s *session) Read(req termapi.ReadRequest) (termapi.ReadResult, error) {
	if s.isDead() {
		return termapi.ReadResult{}, s.errGone()
	}
	ctx, cancel := s.call(context.Background())
	defer cancel()
	page, err := s.proc.rpc.Read(ctx, &backendpb.ReadRequest{SessionId: s.id, Offset: int32(req.Offset), Count: int32(req.Count)})
	if err != nil {
		return termapi.ReadResult{}, s.callErr(ctx, "read", err)
	}
	return termapi.ReadResult{
		Text:       string(page.GetText()),
		TotalLines: int(page.GetTotalLines()),
		LineBegin:  int(page.GetLineBegin()),
		LineEnd:    int(page.GetLineEnd()),
		Truncated:  page.GetTruncated(),
	}, nil
}

func (s *session) Signal(ctx context.Context, sig termapi.Signal) (termapi.SignalResult, error) {
	if s.isDead() {
		return termapi.SignalResult{}, s.errGone()
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	res, err := s.proc.rpc.Signal(cctx, &backendpb.SignalRequest{SessionId: s.id, Signal: string(sig)})
	if err != nil {
		return termapi.SignalResult{}, s.callErr(cctx, "signal", err)
	}
	return termapi.SignalResult{TargetPGID: int(res.GetTargetPgid())}, nil
}

// EndCommand ends, in the plugin, what the latest command started.
func (s *session) EndCommand(ctx context.Context) (int, error) {
	if s.isDead() {
		return 0, s.errGone()
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	res, err := s.proc.rpc.EndCommand(cctx, &backendpb.SessionRef{SessionId: s.id})
	if err != nil {
		return 0, s.callErr(cctx, "end command", err)
	}
	return int(res.GetEnded()), nil
}

// Close closes the session in the plugin. A session whose plugin is gone
// is closed: its processes went with the plugin's terminal.
func (s *session) Close(ctx context.Context, reason string) error {
	if s.isDead() {
		return nil
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	resp, err := s.proc.rpc.Close(cctx, &backendpb.CloseRequest{SessionId: s.id, Reason: reason})
	if err != nil {
		err = s.callErr(cctx, "close", err)
		if s.isDead() {
			return nil
		}
		return err
	}
	s.mu.Lock()
	s.closed, s.final = true, statusFromPB(resp.GetStatus())
	if !s.final.Exited {
		s.final = goneStatus(s.proc)
	}
	s.mu.Unlock()
	return nil
}

func (s *session) StartSend(ctx context.Context, req termapi.SendRequest) (termapi.Send, error) {
	return s.start(ctx, &backendpb.SendStart{
		SessionId: s.id,
		Text:      []byte(req.Text),
		Submit:    req.Submit,
		TimeoutNs: int64(req.Timeout),
		Stream:    req.Stream,
	})
}

func (s *session) Exec(ctx context.Context, req termapi.ExecRequest) (termapi.Send, error) {
	if !s.caps.Exec {
		return nil, unsupported("run commands")
	}
	return s.start(ctx, &backendpb.SendStart{
		SessionId: s.id,
		Exec:      true,
		Command:   []byte(req.Command),
		TimeoutNs: int64(req.Timeout),
		Stream:    req.Stream,
		Captured:  req.Captured,
	})
}

// start opens the stream of a send and waits for the plugin to accept it.
// The stream runs on its own context: the send outlives ctx, which only
// cancels it (as termapi.Session.StartSend says).
func (s *session) start(ctx context.Context, start *backendpb.SendStart) (termapi.Send, error) {
	if s.isDead() {
		return nil, s.errGone()
	}
	streamCtx, stop := context.WithCancel(context.Background())
	stream, err := s.proc.rpc.Send(streamCtx)
	if err != nil {
		stop()
		return nil, s.checkErr(fromStatus("send", err))
	}
	sn := &send{
		session: s, stream: stream, stop: stop, streaming: start.Stream, exec: start.Exec,
		more: make(chan struct{}, 1), settled: make(chan struct{}), answers: make(chan bool, 1), ended: make(chan struct{}),
	}
	fail := func(err error) (termapi.Send, error) {
		stop()
		return nil, s.checkErr(err)
	}
	// The plugin has CallTimeout to accept the send.
	var late atomic.Bool
	timer := time.AfterFunc(s.proc.opts.CallTimeout, func() {
		late.Store(true)
		stop()
	})
	var ev *backendpb.SendEvent
	err = stream.Send(&backendpb.SendControl{Control: &backendpb.SendControl_Start{Start: start}})
	if err == nil {
		ev, err = stream.Recv()
	} else if errors.Is(err, io.EOF) {
		_, err = stream.Recv() // the reason the stream ended
	}
	if !timer.Stop() && late.Load() {
		// The stream is cancelled, and with it the send, if the plugin
		// ever took it; the check decides whether the plugin still lives.
		s.proc.suspect()
		return fail(fmt.Errorf("backendplugin: send: the plugin did not take the send within %s: %w", s.proc.opts.CallTimeout, errCallTimedOut))
	}
	if err != nil {
		err = fromStatus("send", err)
		if errors.Is(err, ErrPluginExited) {
			// The plugin went away with the start on its way: the command
			// may have run, or the text been typed. Never report it as not
			// done (a caller would run it again): the send ended with the
			// shell.
			stop()
			s.gone()
			s.proc.lose()
			sn.mu.Lock()
			sn.settleLocked(sn.lostResult())
			sn.eof = true
			sn.mu.Unlock()
			return sn, nil
		}
		return fail(err)
	}
	if ev.GetStarted() == nil {
		return fail(errors.New("backendplugin: send: the plugin did not start the send"))
	}
	sn.answersCancel = ev.GetStarted().GetAnswersCancel()
	if start.Stream {
		sn.pulling = true // output flows at once; the caller drains it
		sn.control(pullMsg)
	}
	sn.unwatch = context.AfterFunc(ctx, func() {
		s.mu.Lock()
		detached := s.detached
		s.mu.Unlock()
		if detached {
			// The keeper holds the session now and reads the send on:
			// end the stream without interrupting the command.
			sn.stop()
			return
		}
		sn.Cancel()
	})
	go sn.receive()
	return sn, nil
}

// Detach lets the session go: its keeper holds it for a later host. This
// value of it is unusable afterwards.
func (s *session) Detach(ctx context.Context) error {
	if !s.caps.Keep {
		return unsupported("be kept without its caller")
	}
	if s.isDead() {
		return s.errGone()
	}
	if _, err := s.proc.rpc.Detach(ctx, &backendpb.SessionRef{SessionId: s.id}); err != nil {
		return s.checkErr(fromStatus("detach", err))
	}
	s.mu.Lock()
	s.detached = true
	s.mu.Unlock()
	return nil
}

// Resume takes over the unit of work the session's last host lost, from
// its keeper.
func (s *session) Resume(ctx context.Context, req termapi.SendRequest) (termapi.Send, error) {
	if !s.caps.Keep {
		return nil, unsupported("resume work its caller lost")
	}
	if req.Text != "" || req.Submit {
		return nil, fmt.Errorf("backendplugin: resume types nothing: %w", errors.ErrUnsupported)
	}
	return s.start(ctx, &backendpb.SendStart{
		SessionId: s.id,
		Resume:    true,
		TimeoutNs: int64(req.Timeout),
		Stream:    req.Stream,
	})
}

func (s *session) Resize(ctx context.Context, size termapi.Size) error {
	if !s.caps.Resize {
		return unsupported("resize its terminal")
	}
	if s.isDead() {
		return s.errGone()
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	if _, err := s.proc.rpc.Resize(cctx, &backendpb.ResizeRequest{SessionId: s.id, Size: sizeToPB(size)}); err != nil {
		return s.callErr(cctx, "resize", err)
	}
	return nil
}

// maxFilePart bounds the data of one WriteFile message, below gRPC's
// 4 MiB: a larger write goes in parts, appended.
const maxFilePart = 3 << 20

// WriteFile asks the plugin to write the file, in parts of at most
// maxFilePart, each call bounded as any call of the session.
func (s *session) WriteFile(ctx context.Context, req termapi.FileRequest) (string, error) {
	if !s.caps.Files {
		return "", unsupported("write files for its shell")
	}
	if err := req.Validate(); err != nil {
		return "", err
	}
	if s.isDead() {
		return "", s.errGone()
	}
	data := req.Data
	var path string
	for first := true; first || len(data) > 0; first = false {
		part := data[:min(len(data), maxFilePart)]
		data = data[len(part):]
		cctx, cancel := s.call(ctx)
		resp, err := s.proc.rpc.WriteFile(cctx, &backendpb.WriteFileRequest{
			SessionId: s.id, Name: req.Name, Data: part, Append: req.Append || !first, Remove: req.Remove,
		})
		if err != nil {
			err = s.callErr(cctx, "write file", err)
			cancel()
			return "", err
		}
		cancel()
		path = string(resp.GetPath())
	}
	return path, nil
}

// Output asks the plugin for raw output; the call waits there until there
// is some, without a bound of its own (output may be hours away): a plugin
// that stops answering is found out by its health checks and killed, and a
// plugin that goes away ends the output.
func (s *session) Output(ctx context.Context, from int64) (termapi.Chunk, error) {
	if !s.caps.Raw {
		return termapi.Chunk{}, unsupported("hand out its raw output")
	}
	if s.isDead() {
		return termapi.Chunk{Pos: from}, io.EOF
	}
	c, err := s.proc.rpc.Output(ctx, &backendpb.OutputRequest{SessionId: s.id, From: from})
	if err != nil {
		err = s.checkErr(fromStatus("output", err))
		if s.isDead() {
			return termapi.Chunk{Pos: from}, io.EOF
		}
		return termapi.Chunk{}, err
	}
	if c.GetEof() {
		return termapi.Chunk{Pos: c.GetPos()}, io.EOF
	}
	return termapi.Chunk{Pos: c.GetPos(), Data: c.GetData()}, nil
}

var (
	_ termapi.Session = (*session)(nil)
)
