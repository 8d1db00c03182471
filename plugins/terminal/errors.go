package terminal

import (
	"errors"

	"github.com/dshdev/dsh/host"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// errorf marks a message as an instance of a sentinel (host.KindErrorf).
var errorf = host.KindErrorf

func errServiceClosing() error { return errorf(ErrServiceClosing, "PTY service is closing") }

func errOwnerNotLive(o *host.Owner) error {
	if o == nil {
		return errorf(ErrOwnerNotLive, "no PTY owner given")
	}
	return errorf(ErrOwnerNotLive, "PTY owner %q is not live", o.ID())
}

// errNoSession is the answer both for an id that does not exist and for an
// id of another owner: the two must be indistinguishable.
func errNoSession(id string) error { return errorf(termapi.ErrNoSession, "unknown PTY session %s", id) }

// Errors of the service that callers branch on. Messages wrap them with the
// session id or backend type. The errors of sessions themselves are the
// contract's (package termapi).
var (
	ErrDuplicateBackend = errors.New("terminal: backend type already registered")
	ErrNoBackend        = errors.New("terminal: no backend for type")
	ErrOwnerNotLive     = errors.New("terminal: owner is not live")
	ErrDuplicateName    = errors.New("terminal: session name taken")
	ErrServiceClosing   = errors.New("terminal: service is closing")
	// ErrPolicyFenced: an owner's sandbox mode or limits cannot change
	// while it has sessions open or being created.
	ErrPolicyFenced = errors.New("terminal: the spawn policy is fenced by open sessions")
)
