package mcpfront

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// sessionID is the id of a new session: the one revive hands the SDK, or
// a fresh random one.
// A revive's id is taken once, and taking it ends the revive's hold on
// new sessions (see revive).
func (f *Front) sessionID() string {
	if id := f.nextSessionID.Swap(nil); id != nil {
		f.reviving.Unlock()
		return *id
	}
	return rand.Text()
}

// SessionStore remembers, across dsh processes, the HTTP sessions whose
// shells are kept: for each session id (hashed: the id is the session's
// credential), the token identity that opened it, its owner's id and its
// workspace. A dsh started again honours those ids (see HTTPOptions.Sessions).
type SessionStore struct {
	path string

	mu   sync.Mutex
	recs map[string]storedSession
}

type storedSession struct {
	User    string `json:"user"`
	Owner   string `json:"owner"`
	Workdir string `json:"workdir"`
}

// OpenSessionStore reads the store at path (a file in a private
// directory), or starts an empty one.
func OpenSessionStore(path string) (*SessionStore, error) {
	s := &SessionStore{path: path, recs: make(map[string]storedSession)}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mcpfront: session store: %w", err)
	}
	if err := json.Unmarshal(data, &s.recs); err != nil {
		return nil, fmt.Errorf("mcpfront: session store %s: %w", path, err)
	}
	return s, nil
}

func sessionKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

func (s *SessionStore) get(id string) (storedSession, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.recs[sessionKey(id)]
	return rec, ok
}

func (s *SessionStore) put(id string, rec storedSession) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs[sessionKey(id)] = rec
	return s.saveLocked()
}

func (s *SessionStore) remove(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.recs[sessionKey(id)]; !ok {
		return nil
	}
	delete(s.recs, sessionKey(id))
	return s.saveLocked()
}

// saveLocked writes the store whole, atomically, readable by this user
// only.
func (s *SessionStore) saveLocked() error {
	data, err := json.Marshal(s.recs)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), ".sessions-*")
	if err != nil {
		return fmt.Errorf("mcpfront: session store: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("mcpfront: session store: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("mcpfront: session store: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("mcpfront: session store: %w", err)
	}
	return nil
}

// revive makes the SDK serve a session id from before dsh restarted, for
// user: it initializes a session under that id, as the client did the
// first time, so that the client's request goes on as if dsh had never
// gone. The session's owner then takes its kept shell back (ownerFor).
//
// The SDK takes a new session's id from one callback (sessionID), so only
// one session may be in the making while a revive hands it its id: revive
// holds f.reviving from then until the SDK has taken the id, not for the
// whole initialize, so that a thousand clients that come back together
// are revived side by side. Requests for the same id take turns.
func (f *Front) revive(sdk http.Handler, r *http.Request, id, user string, idle *idleSessions) error {
	end, first := f.revives.start(id)
	if !first {
		<-end // another request revives it
		return nil
	}
	defer f.revives.end(id)
	if f.users.known(id) {
		return nil // another request revived it first
	}
	version := r.Header.Get("Mcp-Protocol-Version")
	if version == "" {
		version = "2025-06-18"
	}
	initialize := fmt.Sprintf(`{"jsonrpc":"2.0","id":"dsh-revive","method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"dsh-revived","version":"0"}}}`, version)
	w := newCapture()
	f.reviving.Lock()
	next := &id
	f.nextSessionID.Store(next)
	func() {
		defer func() {
			if f.nextSessionID.CompareAndSwap(next, nil) {
				f.reviving.Unlock() // the SDK made no session
			}
		}()
		f.reviveCall(sdk, r, w, initialize, "", version)
	}()
	if got := w.header.Get(sessionIDHeader); w.code != http.StatusOK || got != id {
		return fmt.Errorf("mcpfront: revive a session: the SDK answered %d: %s", w.code, strings.TrimSpace(w.body.String()))
	}
	if f.recordSession(id, user, func() { idle.forget(id) }) {
		idle.start(id)
	}
	w = newCapture()
	f.reviveCall(sdk, r, w, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, id, version)
	if w.code != http.StatusAccepted && w.code != http.StatusOK {
		return fmt.Errorf("mcpfront: revive a session: initialized: %d: %s", w.code, strings.TrimSpace(w.body.String()))
	}
	return nil
}

// revivals are the session ids being revived, each with a channel closed
// when its revive ends.
type revivals struct {
	mu       sync.Mutex
	inFlight map[string]chan struct{}
}

// start reports whether the caller revives id (first), or another request
// does, which closes end when it is done.
func (v *revivals) start(id string) (end <-chan struct{}, first bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if ch, ok := v.inFlight[id]; ok {
		return ch, false
	}
	if v.inFlight == nil {
		v.inFlight = make(map[string]chan struct{})
	}
	ch := make(chan struct{})
	v.inFlight[id] = ch
	return ch, true
}

func (v *revivals) end(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	close(v.inFlight[id])
	delete(v.inFlight, id)
}

// reviveCall hands the SDK one POST of body, with r's context (its
// token) and authority.
func (f *Front) reviveCall(sdk http.Handler, r *http.Request, w http.ResponseWriter, body, id, version string) {
	req, _ := http.NewRequestWithContext(context.WithoutCancel(r.Context()), http.MethodPost, r.URL.String(), bytes.NewReader([]byte(body)))
	req.Host = r.Host
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if id != "" {
		req.Header.Set(sessionIDHeader, id)
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	sdk.ServeHTTP(w, req)
}

// capture is a ResponseWriter that keeps what the SDK answered.
type capture struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func newCapture() *capture { return &capture{header: make(http.Header)} }

func (c *capture) Header() http.Header { return c.header }
func (c *capture) Write(p []byte) (int, error) {
	if c.code == 0 {
		c.code = http.StatusOK
	}
	return c.body.Write(p)
}
func (c *capture) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
}
func (c *capture) Flush() {}
