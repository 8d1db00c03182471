package dshcmd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/internal/mcpfront"
	"github.com/dshdev/dsh/internal/private"
)

// maxSessionName bounds a --session name: it becomes part of file names.
const maxSessionName = 64

// checkSessionName refuses a --session name that is not a plain name.
func checkSessionName(name string) error {
	if name == "" || len(name) > maxSessionName || name[0] == '.' || name[0] == '-' {
		return fmt.Errorf("--session %q: want 1 to %d letters, digits, '.', '-' or '_', not starting with '.' or '-'", name, maxSessionName)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return fmt.Errorf("--session %q: want 1 to %d letters, digits, '.', '-' or '_', not starting with '.' or '-'", name, maxSessionName)
		}
	}
	return nil
}

// checkSessionFlags refuses --session and --keep-shells where they do
// not apply.
func checkSessionFlags(cmd *cobra.Command, addr, session string, keep time.Duration) error {
	if cmd.Flags().Changed("session") {
		if addr != "" {
			return usageError{errors.New("--session names a stdio session; it does not apply with --http")}
		}
		if err := checkSessionName(session); err != nil {
			return usageError{err}
		}
	}
	if cmd.Flags().Changed("keep-shells") {
		switch {
		case session == "" && cmd.Flags().Lookup("http") == nil:
			return usageError{errors.New("--keep-shells needs --session")}
		case session == "" && addr == "":
			return usageError{errors.New("--keep-shells needs --session or --http")}
		}
		if keep <= 0 {
			return usageError{fmt.Errorf("--keep-shells %s: must be positive", keep)}
		}
	}
	return nil
}

// keepingScope names what dsh keeps shells for: the named stdio session,
// or the HTTP address when --keep-shells is given with --http; "" when
// it keeps none.
func keepingScope(cmd *cobra.Command, addr, session string) string {
	switch {
	case session != "":
		return "session-" + session
	case addr != "" && cmd.Flags().Changed("keep-shells"):
		return "http-" + plainName(addr)
	}
	return ""
}

// plainName is s with every character but letters, digits, '.', '-' and
// '_' made '_', and no leading dot: as the terminals service names a
// keeper's directory.
func plainName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, strings.TrimLeft(s, "."))
}

// keepingOptions asks the host to keep the shells of scope past dsh;
// none for "".
func keepingOptions(scope string, keep time.Duration) []host.Option {
	if scope == "" {
		return nil
	}
	return []host.Option{host.WithKeeping(host.Keeping{Scope: scope, Keep: keep})}
}

// openSessionStore opens the store of the HTTP sessions whose shells dsh
// keeps, in the keepers' directory of scope.
func openSessionStore(scope string) (*mcpfront.SessionStore, error) {
	base, err := private.Dir()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(base, "keep-"+plainName(scope))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("keeping shells: %w", err)
	}
	return mcpfront.OpenSessionStore(filepath.Join(dir, "sessions.json"))
}

// sessionOwnerID is the id of a named session's owner: the same in every
// dsh serving that name, so that its keeper hands the shell back.
func sessionOwnerID(session string) string { return "session-" + session }
