package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/internal/audit"
)

// What the front knows of each session, for an operator (Sessions,
// EndSession) and for the audit log: who it is, since when, and the call
// it runs. Kept from the session's first call until it ends; guarded by
// Front.mu.
type sessionState struct {
	owner     *host.Owner
	transport string // "stdio" or "http"
	who       string // the token's identity, or the transport
	client    string // the client's name and version
	started   time.Time
	calls     int
	lastCall  time.Time
	// The call running, if any: its tool, its raw arguments (decoded only
	// when asked for) and its start.
	tool    string
	args    json.RawMessage
	running time.Time
	// ended: the operator ended the session (EndSession); a call that
	// returns after fails, rather than answering as if it ran.
	ended bool
}

// SessionInfo describes a session with an owner, as an operator lists it.
type SessionInfo struct {
	// Session is the owner's id ("mcp-…"): never the Mcp-Session-Id,
	// which is an HTTP session's credential.
	Session   string `json:"session"`
	Transport string `json:"transport"`
	// Owner is who opened it: a token's identity ("token-…"), or the
	// transport.
	Owner   string    `json:"owner"`
	Client  string    `json:"client,omitempty"`
	Workdir string    `json:"workdir"`
	Since   time.Time `json:"since"`
	Calls   int       `json:"calls"`
	// LastCall is when the last call started; zero before the first ends.
	LastCall time.Time `json:"lastCall,omitzero"`
	// Running is the call running now, if any.
	Running *RunningCall `json:"running,omitempty"`
	// HostOwner is the session's owner, for the caller to look up what it
	// holds (its shells).
	HostOwner *host.Owner `json:"-"`
}

// RunningCall is a call in progress.
type RunningCall struct {
	Tool    string    `json:"tool"`
	Command string    `json:"command,omitempty"`
	Since   time.Time `json:"since"`
}

// ErrNoSession is the error of EndSession for an id no session has.
var ErrNoSession = errors.New("mcpfront: no such session")

// ErrSessionEnded is the error of a call whose session the operator ended
// while it ran (EndSession).
var ErrSessionEnded = errors.New("the operator ended this session")

// beginCall notes a call of tool with args on ss, whose owner is owner,
// and returns the session's state.
func (f *Front) beginCall(ss *mcp.ServerSession, owner *host.Owner, extra *mcp.RequestExtra, tool string, args json.RawMessage, start time.Time) *sessionState {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.states[ss]
	if st == nil {
		st = &sessionState{owner: owner, transport: "stdio", who: "stdio", started: start}
		if extra != nil && extra.Header != nil {
			st.transport, st.who = "http", "http"
		}
		if extra != nil && extra.TokenInfo != nil && extra.TokenInfo.UserID != "" {
			st.who = extra.TokenInfo.UserID
		}
		if ss != nil {
			if ip := ss.InitializeParams(); ip != nil && ip.ClientInfo != nil {
				st.client = strings.TrimSpace(ip.ClientInfo.Name + " " + ip.ClientInfo.Version)
			}
		}
		f.states[ss] = st
	}
	st.calls++
	st.lastCall = start
	st.tool, st.args, st.running = tool, args, start
	return st
}

// endCall notes that the session's call has ended.
// endCall records that the call of st has returned, and reports whether
// the operator ended the session meanwhile.
func (f *Front) endCall(st *sessionState) (ended bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st.tool, st.args, st.running = "", nil, time.Time{}
	return st.ended
}

// commandOf is the command of a call's arguments ({"command": "…"}), and
// otherwise the arguments as JSON text.
func commandOf(args json.RawMessage) (command, arguments string) {
	var a struct {
		Command *string `json:"command"`
	}
	if json.Unmarshal(args, &a) == nil && a.Command != nil {
		return *a.Command, ""
	}
	if len(args) == 0 {
		return "", ""
	}
	return "", string(args)
}

// auditCall writes a call's record to the audit log.
func (f *Front) auditCall(st *sessionState, tool string, args json.RawMessage, start time.Time, outcome string, res host.Result, notes map[string]any) {
	command, arguments := commandOf(args)
	f.mu.Lock()
	r := audit.Record{Time: start, Session: st.owner.ID(), Owner: st.who, Client: st.client, Tool: tool,
		Command: command, Arguments: arguments, Outcome: outcome,
		DurationMs: float64(time.Since(start).Microseconds()) / 1000, OutputBytes: len(res.Text)}
	f.mu.Unlock()
	if code, ok := notes["exitCode"].(int); ok {
		r.ExitCode = &code
	}
	if ended, ok := notes["ended"].(string); ok {
		r.Ended = ended
	}
	if err := f.audit.Write(r); err != nil {
		f.logger.Warn("the audit log could not be written", "error", err)
	}
}

// Sessions lists the sessions that have an owner, oldest first.
func (f *Front) Sessions() []SessionInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]SessionInfo, 0, len(f.states))
	for _, st := range f.states {
		if !st.owner.Live() {
			continue
		}
		info := SessionInfo{Session: st.owner.ID(), Transport: st.transport, Owner: st.who, Client: st.client,
			Workdir: st.owner.Workdir(), Since: st.started, Calls: st.calls, LastCall: st.lastCall, HostOwner: st.owner}
		if !st.running.IsZero() {
			command, arguments := commandOf(st.args)
			if command == "" {
				command = arguments
			}
			info.Running = &RunningCall{Tool: st.tool, Command: command, Since: st.running}
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b SessionInfo) int { return a.Since.Compare(b.Since) })
	return out
}

// EndSession ends the session whose owner has id: its calls are
// cancelled, its shells closed, and the client's connection ended (a
// stdio client's dsh then exits).
func (f *Front) EndSession(ctx context.Context, id string) error {
	f.mu.Lock()
	var match *mcp.ServerSession
	for ss, st := range f.states {
		if st.owner.ID() == id {
			match = ss
			st.ended = true
		}
	}
	f.mu.Unlock()
	if match == nil {
		return ErrNoSession
	}
	f.logger.Info("ending a session at the operator's request", "owner", id)
	err := f.closeOwner(ctx, match)
	match.Close()
	return err
}
