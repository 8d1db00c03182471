package backendplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/dshdev/dsh/plugins/terminal/backendplugin/internal/backendpb"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// NewBackend builds a backend from the config of its deployment entry, a
// JSON object ("{}" when the entry has none). Decode it strictly: an
// unknown key is the user's typo. The error is shown to the user as the
// cause of a failed load.
type NewBackend func(ctx context.Context, config json.RawMessage) (termapi.Backend, error)

// closer is implemented by backends that hold resources of their own
// beyond their sessions.
type closer interface {
	Close(ctx context.Context) error
}

// closeGrace bounds the close of every session when the plugin stops.
const closeGrace = 10 * time.Second

// server is the plugin's side of the protocol: one backend, made by
// Configure, and the sessions it spawned by the id the host gave them.
type server struct {
	backendpb.UnimplementedBackendServer
	newBackend NewBackend

	mu       sync.Mutex
	backend  termapi.Backend
	sessions map[string]termapi.Session
	stopped  bool
	// keep is set when the server is a keeper (see OpenKeeper): it
	// outlives its hosts, and keeps what they lose.
	keep *keeping
}

func newServer(nb NewBackend) *server {
	return &server{newBackend: nb, sessions: make(map[string]termapi.Session)}
}

func (s *server) Configure(ctx context.Context, req *backendpb.ConfigureRequest) (*backendpb.ConfigureResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	raw := json.RawMessage(req.GetConfigJson())
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	if s.keep != nil {
		return s.keep.configureLocked(ctx, raw, req)
	}
	if s.backend != nil {
		return nil, toStatus(errors.New("backendplugin: the backend is configured already"))
	}
	b, err := s.newBackend(ctx, raw)
	if err != nil {
		return nil, toStatus(err)
	}
	if b == nil || b.Type() == "" {
		return nil, toStatus(errors.New("backendplugin: the plugin made no backend, or one without a type"))
	}
	s.backend = b
	return &backendpb.ConfigureResponse{Type: b.Type()}, nil
}

func (s *server) Spawn(ctx context.Context, req *backendpb.SpawnRequest) (*backendpb.SpawnResponse, error) {
	s.mu.Lock()
	b, stopped := s.backend, s.stopped
	_, taken := s.sessions[req.GetSessionId()]
	s.mu.Unlock()
	switch {
	case b == nil:
		return nil, toStatus(ErrNotConfigured)
	case stopped:
		return nil, toStatus(termapi.ErrSessionClosing)
	case req.GetSessionId() == "" || taken:
		return nil, toStatus(errors.New("backendplugin: spawn needs a session id of its own"))
	}
	sess, err := b.Spawn(ctx, termapi.SpawnSpec{
		SessionID: req.GetSessionId(),
		OwnerID:   req.GetOwnerId(),
		Cwd:       req.GetCwd(),
		Name:      req.GetName(),
		Policy:    policyFromPB(req.GetPolicy()),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		closeCtx, cancel := context.WithTimeout(context.Background(), closeGrace)
		defer cancel()
		_ = sess.Close(closeCtx, "backend plugin stopping")
		return nil, toStatus(termapi.ErrSessionClosing)
	}
	s.sessions[req.GetSessionId()] = sess
	s.mu.Unlock()
	if s.keep != nil {
		s.keep.add(connOf(ctx), termapi.SpawnSpec{SessionID: req.GetSessionId(), OwnerID: req.GetOwnerId(), Name: req.GetName()}, sess)
	}
	return s.spawnResponse(sess), nil
}

// spawnResponse describes a session to the host: a keeper's can be kept.
func (s *server) spawnResponse(sess termapi.Session) *backendpb.SpawnResponse {
	resp := spawnResponse(sess)
	if s.keep != nil {
		resp.Capabilities.Keep = true
	}
	return resp
}

// List describes the backend's sessions as the backend lists them.
func (s *server) List(ctx context.Context, _ *backendpb.ListRequest) (*backendpb.ListResponse, error) {
	s.mu.Lock()
	b := s.backend
	s.mu.Unlock()
	if b == nil {
		return nil, toStatus(ErrNotConfigured)
	}
	if s.keep != nil {
		out := &backendpb.ListResponse{}
		for _, in := range s.keep.list(connOf(ctx)) {
			out.Sessions = append(out.Sessions, infoToPB(in))
		}
		return out, nil
	}
	infos, err := b.List(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &backendpb.ListResponse{Sessions: make([]*backendpb.SessionInfo, len(infos))}
	for i, in := range infos {
		out.Sessions[i] = infoToPB(in)
	}
	return out, nil
}

// Attach hands a session of the backend to the host: one this server
// serves already, or one the backend holds and hands over.
func (s *server) Attach(ctx context.Context, req *backendpb.SessionRef) (*backendpb.SpawnResponse, error) {
	id := req.GetSessionId()
	if s.keep != nil {
		k, err := s.keep.attach(ctx, connOf(ctx), id)
		if err != nil {
			return nil, toStatus(err)
		}
		return s.spawnResponse(k.sess), nil
	}
	if sess, err := s.session(ctx, id); err == nil {
		return spawnResponse(sess), nil
	}
	s.mu.Lock()
	b := s.backend
	s.mu.Unlock()
	if b == nil {
		return nil, toStatus(ErrNotConfigured)
	}
	sess, err := b.Attach(ctx, id)
	if err != nil {
		return nil, toStatus(err)
	}
	s.mu.Lock()
	if prev, ok := s.sessions[id]; ok {
		sess = prev
	} else {
		s.sessions[id] = sess
	}
	s.mu.Unlock()
	return spawnResponse(sess), nil
}

func (s *server) Resize(ctx context.Context, req *backendpb.ResizeRequest) (*backendpb.ResizeResponse, error) {
	sess, err := s.session(ctx, req.GetSessionId())
	if err != nil {
		return nil, toStatus(err)
	}
	if err := sess.Resize(ctx, sizeFromPB(req.GetSize())); err != nil {
		return nil, toStatus(err)
	}
	return &backendpb.ResizeResponse{}, nil
}

func (s *server) WriteFile(ctx context.Context, req *backendpb.WriteFileRequest) (*backendpb.WriteFileResponse, error) {
	sess, err := s.session(ctx, req.GetSessionId())
	if err != nil {
		return nil, toStatus(err)
	}
	path, err := sess.WriteFile(ctx, termapi.FileRequest{Name: req.GetName(), Data: req.GetData(), Append: req.GetAppend(), Remove: req.GetRemove()})
	if err != nil {
		return nil, toStatus(err)
	}
	return &backendpb.WriteFileResponse{Path: []byte(path)}, nil
}

// maxChunk bounds one Output answer: a reader behind by more gets the rest
// with its next call.
const maxChunk = 1 << 20

func (s *server) Output(ctx context.Context, req *backendpb.OutputRequest) (*backendpb.OutputChunk, error) {
	sess, err := s.session(ctx, req.GetSessionId())
	if err != nil {
		return nil, toStatus(err)
	}
	c, err := sess.Output(ctx, req.GetFrom())
	if errors.Is(err, io.EOF) {
		return &backendpb.OutputChunk{Pos: c.Pos, Eof: true}, nil
	}
	if err != nil {
		return nil, toStatus(err)
	}
	limit := maxChunk
	if m := int(req.GetMax()); m > 0 && m < limit {
		limit = m
	}
	if len(c.Data) > limit {
		c.Data = c.Data[:limit]
	}
	return &backendpb.OutputChunk{Pos: c.Pos, Data: c.Data}, nil
}

// session looks up a live session by id: for a keeper, one the caller's
// host holds.
func (s *server) session(ctx context.Context, id string) (termapi.Session, error) {
	if s.keep != nil {
		k, err := s.keep.held(connOf(ctx), id)
		if err != nil {
			return nil, err
		}
		return k.sess, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[id]
	if !ok {
		return nil, termapi.ErrNoSession
	}
	return sess, nil
}

// Detach lets a session go to its keeper, which keeps it for another
// host; outside a keeper no session can be kept.
func (s *server) Detach(ctx context.Context, req *backendpb.SessionRef) (*backendpb.DetachResponse, error) {
	if s.keep == nil {
		return nil, toStatus(fmt.Errorf("backendplugin: no keeper serves the session: %w", errors.ErrUnsupported))
	}
	conn := connOf(ctx)
	k, err := s.keep.held(conn, req.GetSessionId())
	if err != nil {
		return nil, toStatus(err)
	}
	s.keep.release(k, conn)
	return &backendpb.DetachResponse{}, nil
}

func (s *server) Status(ctx context.Context, req *backendpb.SessionRef) (*backendpb.SessionStatus, error) {
	sess, err := s.session(ctx, req.GetSessionId())
	if err != nil {
		return nil, toStatus(err)
	}
	return statusToPB(sess.Status()), nil
}

func (s *server) Read(ctx context.Context, req *backendpb.ReadRequest) (*backendpb.ReadResponse, error) {
	sess, err := s.session(ctx, req.GetSessionId())
	if err != nil {
		return nil, toStatus(err)
	}
	page, err := sess.Read(termapi.ReadRequest{Offset: int(req.GetOffset()), Count: int(req.GetCount())})
	if err != nil {
		return nil, toStatus(err)
	}
	return &backendpb.ReadResponse{
		Text:       []byte(page.Text),
		TotalLines: int32(page.TotalLines),
		LineBegin:  int32(page.LineBegin),
		LineEnd:    int32(page.LineEnd),
		Truncated:  page.Truncated,
	}, nil
}

func (s *server) Signal(ctx context.Context, req *backendpb.SignalRequest) (*backendpb.SignalResponse, error) {
	sess, err := s.session(ctx, req.GetSessionId())
	if err != nil {
		return nil, toStatus(err)
	}
	res, err := sess.Signal(ctx, termapi.Signal(req.GetSignal()))
	if err != nil {
		return nil, toStatus(err)
	}
	return &backendpb.SignalResponse{TargetPgid: int64(res.TargetPGID)}, nil
}

func (s *server) EndCommand(ctx context.Context, req *backendpb.SessionRef) (*backendpb.EndCommandResponse, error) {
	sess, err := s.session(ctx, req.GetSessionId())
	if err != nil {
		return nil, toStatus(err)
	}
	n, err := sess.EndCommand(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &backendpb.EndCommandResponse{Ended: int64(n)}, nil
}

// Close closes a session and forgets it once it is gone; a close that
// fails keeps it, so that the host can retry.
func (s *server) Close(ctx context.Context, req *backendpb.CloseRequest) (*backendpb.CloseResponse, error) {
	sess, err := s.session(ctx, req.GetSessionId())
	if errors.Is(err, termapi.ErrNoSession) {
		return &backendpb.CloseResponse{}, nil // closed already: Close is idempotent
	}
	if err := sess.Close(ctx, req.GetReason()); err != nil {
		return nil, toStatus(err)
	}
	s.mu.Lock()
	if s.sessions[req.GetSessionId()] == sess {
		delete(s.sessions, req.GetSessionId())
	}
	s.mu.Unlock()
	if s.keep != nil {
		s.keep.forget(req.GetSessionId())
	}
	return &backendpb.CloseResponse{Status: statusToPB(sess.Status())}, nil
}

// Send runs one send; see backend.proto for the exchange.
func (s *server) Send(stream grpc.BidiStreamingServer[backendpb.SendControl, backendpb.SendEvent]) error {
	msg, err := stream.Recv()
	if err != nil {
		return err
	}
	start := msg.GetStart()
	if start == nil {
		return toStatus(errors.New("backendplugin: a send must begin with its start"))
	}
	if s.keep != nil {
		return s.keep.send(stream, start)
	}
	if start.GetResume() {
		return toStatus(fmt.Errorf("backendplugin: no keeper serves the session: %w", errors.ErrUnsupported))
	}
	sess, err := s.session(stream.Context(), start.GetSessionId())
	if err != nil {
		return toStatus(err)
	}
	// The send is bound to the stream: a host that goes away cancels it.
	ctx := stream.Context()
	var sn termapi.Send
	timeout := time.Duration(start.GetTimeoutNs())
	if start.GetExec() {
		sn, err = sess.Exec(ctx, termapi.ExecRequest{Command: string(start.GetCommand()), Timeout: timeout, Stream: start.GetStream(), Captured: start.GetCaptured()})
	} else {
		sn, err = sess.StartSend(ctx, termapi.SendRequest{Text: string(start.GetText()), Submit: start.GetSubmit(), Timeout: timeout, Stream: start.GetStream()})
	}
	if err != nil {
		return toStatus(err)
	}
	// Events go out from this goroutine and, for Cancel's answers, from the
	// one receiving controls; a gRPC stream takes one sender at a time, and
	// none once this handler has returned.
	var (
		sendMu   sync.Mutex
		returned bool
	)
	defer func() {
		sendMu.Lock()
		returned = true
		sendMu.Unlock()
	}()
	sendEvent := func(ev *backendpb.SendEvent) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		if returned {
			return io.EOF
		}
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
				return // the stream ended, or the host closed its side
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
				// The host cannot know whether the send had settled here
				// when its Cancel came; the answer tells it. An error means
				// the stream ended, which the host sees by itself.
				interrupted := sn.Cancel()
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

	settled := make(chan struct{})
	var (
		res     termapi.SendResult
		waitErr error
	)
	go func() {
		defer close(settled)
		res, waitErr = sn.Wait(ctx)
	}()

	// Until the send settles, output goes out as the host asks for it.
	sendOutput := func(text string, eof bool) error {
		return sendEvent(&backendpb.SendEvent{Event: &backendpb.SendEvent_Output{Output: &backendpb.Output{Text: []byte(text), Eof: eof}}})
	}
pulling:
	for {
		for take() {
			out, err := sn.Output(ctx)
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
	<-settled
	if waitErr != nil {
		return toStatus(waitErr)
	}
	if err := sendEvent(&backendpb.SendEvent{Event: &backendpb.SendEvent_Result{Result: resultToPB(res)}}); err != nil {
		return err
	}
	// What is left is bounded now that the send has settled: all of it
	// goes, so that the stream can end.
	for {
		out, err := sn.Output(ctx)
		if errors.Is(err, io.EOF) {
			return sendOutput("", true)
		}
		if err != nil {
			return toStatus(err)
		}
		if err := sendOutput(out, false); err != nil {
			return err
		}
	}
}

// stop closes every session and then the backend, once: when the host
// asks the plugin to stop, or goes away.
func (s *server) stop() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.stopped = true
	sessions := s.sessions
	s.sessions = make(map[string]termapi.Session)
	b := s.backend
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
	defer cancel()
	var wg sync.WaitGroup
	for _, sess := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = sess.Close(ctx, "backend plugin stopped")
		}()
	}
	wg.Wait()
	if c, ok := b.(closer); ok {
		_ = c.Close(ctx)
	}
	if s.keep != nil {
		for id := range sessions {
			s.keep.forget(id)
		}
	}
}
