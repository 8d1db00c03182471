package terminal

import (
	"fmt"

	"github.com/dshdev/dsh/host"
)

// kindError carries its own message and still matches a sentinel under
// errors.Is, so a message reads naturally without repeating the sentinel's
// text.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// errorf formats a message and marks it as an instance of kind.
func errorf(kind error, format string, args ...any) error {
	return &kindError{msg: fmt.Sprintf(format, args...), kind: kind}
}

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
