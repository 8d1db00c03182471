//go:build linux

package dshcmd

// The admin endpoint: how an operator lists a running server's sessions
// and ends one (dsh sessions).
//
// Every dsh serve, over stdio or HTTP, listens on a unix socket of its own
// in the private directory, admin-<pid namespace>-<pid>-<start time>-<random>.sock,
// for HTTP requests: GET /sessions lists its sessions, DELETE
// /sessions/{id} ends one. Only processes of dsh's own user may connect
// (the directory is 0700, and every peer's uid is checked with
// SO_PEERCRED), and no token is needed. Why not an endpoint beside /mcp on
// the bearer token: an HTTP server's tokens are separate identities (a
// session belongs to the token that opened it), and a listing would show
// every client what the others run; the operator is the user dsh runs as,
// who can read its private directory anyway. A unix socket also serves the
// stdio servers an agent client starts, one per session, which have no
// port at all. A server killed outright leaves its socket behind: the next
// server, or dsh sessions, removes those whose process is gone.

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/internal/mcpfront"
	"github.com/dshdev/dsh/internal/private"
	"github.com/dshdev/dsh/internal/proc"
)

// adminPrefix names the admin sockets in the private directory.
const adminPrefix = "admin-"

// serverInfo is what GET /sessions answers.
type serverInfo struct {
	PID      int          `json:"pid"`
	Version  string       `json:"version"`
	Serving  string       `json:"serving"` // "stdio", or the HTTP address
	Started  time.Time    `json:"started"`
	Sessions []adminEntry `json:"sessions"`
}

// adminEntry is a session with what its owner holds.
type adminEntry struct {
	mcpfront.SessionInfo
	Shells []shellInfo `json:"shells,omitempty"`
}

// shellInfo is a process the session holds, with its current directory.
type shellInfo struct {
	host.Held
	Cwd string `json:"cwd,omitempty"`
}

// startAdmin listens on the server's admin socket and serves it until
// the returned stop is called. A failure is logged, not fatal: serving
// the agent matters more.
func startAdmin(h *host.Host, front *mcpfront.Front, serving string, logger *slog.Logger) (stop func()) {
	dir, err := private.Dir()
	if err != nil {
		logger.Warn("no admin socket: dsh sessions will not see this server", "error", err)
		return func() {}
	}
	sweepAdminSockets(dir)
	tag, err := proc.OwnerTag()
	if err != nil {
		logger.Warn("no admin socket: dsh sessions will not see this server", "error", err)
		return func() {}
	}
	// A random part too: several servers may run in one process (tests,
	// a program that embeds dsh's command line).
	path := filepath.Join(dir, adminPrefix+tag+"-"+strings.ToLower(rand.Text()[:8])+".sock")
	ln, err := listenUnix(path)
	if err != nil {
		logger.Warn("no admin socket: dsh sessions will not see this server", "error", err)
		return func() {}
	}
	peers := &peerListener{Listener: ln, uid: os.Getuid(), logger: logger}
	started := time.Now()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /sessions", func(w http.ResponseWriter, r *http.Request) {
		info := serverInfo{PID: os.Getpid(), Version: versionString(), Serving: serving, Started: started}
		for _, s := range front.Sessions() {
			info.Sessions = append(info.Sessions, adminEntry{SessionInfo: s, Shells: held(h, s.HostOwner)})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(info)
	})
	mux.HandleFunc("DELETE /sessions/{id}", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), shutdownTimeout)
		defer cancel()
		err := front.EndSession(ctx, r.PathValue("id"))
		switch {
		case errors.Is(err, mcpfront.ErrNoSession):
			http.Error(w, "no such session", http.StatusNotFound)
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(peers)
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
		<-done
		os.Remove(path)
	}
}

// held lists what the plugins hold for owner, each process with its
// current directory.
func held(h *host.Host, owner *host.Owner) []shellInfo {
	var out []shellInfo
	for _, inst := range h.Instances() {
		holder, ok := inst.Value.(host.Holder)
		if !ok {
			continue
		}
		for _, x := range holder.Holding(owner) {
			s := shellInfo{Held: x}
			if x.PID > 0 {
				s.Cwd, _ = os.Readlink(fmt.Sprintf("/proc/%d/cwd", x.PID))
			}
			out = append(out, s)
		}
	}
	return out
}

// sweepAdminSockets removes the admin sockets of servers that are gone.
func sweepAdminSockets(dir string) {
	paths, _ := filepath.Glob(filepath.Join(dir, adminPrefix+"*.sock"))
	for _, p := range paths {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), adminPrefix), ".sock")
		if proc.OwnerGone(name) {
			os.Remove(p)
		}
	}
}

// adminClient talks HTTP to one admin socket.
func adminClient(path string) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}},
	}
}

// servers asks every live admin socket of this user for its sessions.
func servers(ctx context.Context) ([]serverInfo, []string, error) {
	dir, err := private.Dir()
	if err != nil {
		return nil, nil, err
	}
	sweepAdminSockets(dir)
	paths, _ := filepath.Glob(filepath.Join(dir, adminPrefix+"*.sock"))
	var out []serverInfo
	var socks []string
	for _, p := range paths {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://dsh/sessions", nil)
		c := adminClient(p)
		resp, err := c.Do(req)
		if err != nil {
			continue // a server that is stopping
		}
		var info serverInfo
		err = json.NewDecoder(resp.Body).Decode(&info)
		resp.Body.Close()
		c.CloseIdleConnections()
		if err == nil {
			out = append(out, info)
			socks = append(socks, p)
		}
	}
	return out, socks, nil
}

func sessionsCommand(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "sessions [end SESSION]",
		Short: "List the sessions of this user's running dsh servers, or end one",
		Long: `sessions lists the sessions of every dsh serve of yours that runs on this
machine, over stdio or HTTP: for each, its id, who opened it (a token's
identity, or the transport), the client, since when, how many calls, the
call it runs now (tool, command, since when), and the processes it holds
(its shell's pid and current directory). "sessions end SESSION" ends that
session: its call is cancelled, its shell closed, and its client
disconnected (a stdio client's dsh exits).

Each server answers on a unix socket in your private directory
($XDG_RUNTIME_DIR/dsh), which only your own processes may use.`,
		Example: `  dsh sessions
  dsh sessions --json
  dsh sessions end mcp-4T2XKQ3W7ZLM5N6P`,
		Args: usageArgs(func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 || (len(args) == 2 && args[0] == "end") {
				return nil
			}
			return errors.New(`want no argument, or "end SESSION"`)
		}),
		RunE: func(cmd *cobra.Command, args []string) error {
			infos, socks, err := servers(cmd.Context())
			if err != nil {
				return err
			}
			if len(args) == 2 {
				return endSession(cmd.Context(), g, infos, socks, args[1])
			}
			if asJSON {
				enc := json.NewEncoder(g.stdout)
				enc.SetIndent("", "  ")
				if infos == nil {
					infos = []serverInfo{}
				}
				return enc.Encode(infos)
			}
			printSessions(g, infos)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: each server with its sessions")
	return cmd
}

func endSession(ctx context.Context, g *globals, infos []serverInfo, socks []string, id string) error {
	for i, info := range infos {
		for _, s := range info.Sessions {
			if s.Session != id {
				continue
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, "http://dsh/sessions/"+id, nil)
			resp, err := adminClient(socks[i]).Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				return fmt.Errorf("dsh %d: ending %s: %s", info.PID, id, resp.Status)
			}
			fmt.Fprintf(g.stdout, "ended %s (dsh %d)\n", id, info.PID)
			return nil
		}
	}
	return usageError{fmt.Errorf("no running dsh of yours has a session %q (see dsh sessions)", id)}
}

func printSessions(g *globals, infos []serverInfo) {
	if len(infos) == 0 {
		fmt.Fprintln(g.stdout, "no dsh server of yours is running")
		return
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Started.Before(infos[j].Started) })
	now := time.Now()
	for i, info := range infos {
		if i > 0 {
			fmt.Fprintln(g.stdout)
		}
		fmt.Fprintf(g.stdout, "dsh %d (%s), serving %s, up %s: %d sessions\n", info.PID, info.Version, info.Serving, since(now, info.Started), len(info.Sessions))
		if len(info.Sessions) == 0 {
			continue
		}
		tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  SESSION\tOWNER\tCLIENT\tSINCE\tCALLS\tSHELL PID\tCWD\tRUNNING")
		for _, s := range info.Sessions {
			pid, cwd := "-", "-"
			for _, sh := range s.Shells {
				if sh.PID > 0 {
					pid, cwd = fmt.Sprint(sh.PID), sh.Cwd
				}
			}
			running := "-"
			if r := s.Running; r != nil {
				running = fmt.Sprintf("%s for %s: %s", r.Tool, since(now, r.Since), oneLine(r.Command))
			}
			client := s.Client
			if client == "" {
				client = "-"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s ago\t%d\t%s\t%s\t%s\n", s.Session, s.Owner, client, since(now, s.Since), s.Calls, pid, cwd, running)
		}
		tw.Flush()
	}
}

func since(now, t time.Time) string {
	return now.Sub(t).Round(time.Second).String()
}
