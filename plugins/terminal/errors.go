package terminal

import (
	"github.com/dshdev/dsh/host"
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
func errNoSession(id string) error { return errorf(ErrNoSession, "unknown PTY session %s", id) }
