package dshcmd

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/dshdev/dsh/host"
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
		if session == "" {
			return usageError{errors.New("--keep-shells needs --session")}
		}
		if keep <= 0 {
			return usageError{fmt.Errorf("--keep-shells %s: must be positive", keep)}
		}
	}
	return nil
}

// keepingOptions asks the host to keep the shells of session past dsh;
// none without a session.
func keepingOptions(session string, keep time.Duration) []host.Option {
	if session == "" {
		return nil
	}
	return []host.Option{host.WithKeeping(host.Keeping{Scope: "session-" + session, Keep: keep})}
}

// sessionOwnerID is the id of a named session's owner: the same in every
// dsh serving that name, so that its keeper hands the shell back.
func sessionOwnerID(session string) string { return "session-" + session }
