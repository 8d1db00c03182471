package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	terminalbash "github.com/dshdev/dsh/plugins/terminal-bash"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// auditLog appends records to a file, one JSON object per line.
type auditLog struct {
	mu sync.Mutex
	f  *os.File
}

// record is one line of the log.
type record struct {
	Time     time.Time `json:"time"`
	Owner    string    `json:"owner"`
	Session  string    `json:"session"`
	Event    string    `json:"event"` // "exec" or "end"
	Command  string    `json:"command,omitempty"`
	ExitCode *int      `json:"exitCode,omitempty"`
	Reason   string    `json:"reason,omitempty"`
}

func openLog(path string) (*auditLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return &auditLog{f: f}, nil
}

func (l *auditLog) write(r record) {
	r.Time = time.Now().UTC()
	line, _ := json.Marshal(r)
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.f.Write(append(line, '\n'))
}

// auditBackend is the shell backend under another type, with audited
// sessions.
type auditBackend struct {
	*terminalbash.Backend
	log *auditLog
}

func (b *auditBackend) Type() string { return "audited-shell" }

func (b *auditBackend) Spawn(ctx context.Context, spec termapi.SpawnSpec) (termapi.Session, error) {
	s, err := b.Backend.Spawn(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &auditSession{Session: s, log: b.log, spec: spec}, nil
}

// Attach hands over an open session, audited like the ones Spawn returns.
func (b *auditBackend) Attach(ctx context.Context, id string) (termapi.Session, error) {
	s, err := b.Backend.Attach(ctx, id)
	if err != nil {
		return nil, err
	}
	spec := termapi.SpawnSpec{SessionID: id}
	if infos, err := b.Backend.List(ctx); err == nil {
		for _, in := range infos {
			if in.ID == id {
				spec.OwnerID, spec.Name = in.OwnerID, in.Name
			}
		}
	}
	return &auditSession{Session: s, log: b.log, spec: spec}, nil
}

// Close closes the shells, then the log.
func (b *auditBackend) Close(ctx context.Context) error {
	err := b.Backend.Close(ctx)
	b.log.mu.Lock()
	defer b.log.mu.Unlock()
	if cerr := b.log.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// auditSession logs each command as it starts and as it ends.
type auditSession struct {
	termapi.Session
	log  *auditLog
	spec termapi.SpawnSpec
}

func (s *auditSession) Exec(ctx context.Context, req termapi.ExecRequest) (termapi.Send, error) {
	sn, err := s.Session.Exec(ctx, req)
	if err != nil {
		return nil, err
	}
	s.log.write(record{Owner: s.spec.OwnerID, Session: s.spec.SessionID, Event: "exec", Command: req.Command})
	return &auditSend{Send: sn, s: s}, nil
}

// auditSend logs the end of its command when its result says so.
type auditSend struct {
	termapi.Send
	s    *auditSession
	once sync.Once
}

func (a *auditSend) Wait(ctx context.Context) (termapi.SendResult, error) {
	res, err := a.Send.Wait(ctx)
	if err == nil && res.Exec != nil && (res.Exec.State == termapi.ExecCompleted || res.Exec.State == termapi.ExecAbandoned) {
		a.once.Do(func() {
			code := res.Exec.ExitCode
			a.s.log.write(record{Owner: a.s.spec.OwnerID, Session: a.s.spec.SessionID, Event: "end", ExitCode: &code, Reason: string(res.Exec.State)})
		})
	}
	return res, err
}
