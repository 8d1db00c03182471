package terminalkubernetes

import (
	"context"
	"errors"

	"github.com/dshdev/dsh/plugins/terminal/inband"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// session is a shell in a pod: the in-band engine's session, with the
// signals a terminal has no character for delivered by the pod helper.
type session struct {
	*inband.Session
	link *podLink
	pod  string
}

// helperSignals are the signals the helper delivers: the others are
// terminal characters, typed by the engine (which also retypes an
// interrupt a starting job missed).
var helperSignals = map[termapi.Signal]bool{
	termapi.SIGTERM: true, termapi.SIGKILL: true, termapi.SIGHUP: true, termapi.SIGCONT: true,
}

// Signal delivers sig to the terminal's foreground process group: SIGINT,
// SIGTSTP and SIGQUIT as the terminal's characters, SIGTERM, SIGKILL,
// SIGHUP and SIGCONT through the helper, which never kills the shell
// itself. Without the helper those four are refused as the engine refuses
// them.
func (s *session) Signal(ctx context.Context, sig termapi.Signal) (termapi.SignalResult, error) {
	if !helperSignals[sig] || s.link.ctrl == nil {
		return s.Session.Signal(ctx, sig)
	}
	if err := ctx.Err(); err != nil {
		return termapi.SignalResult{}, s.Errorf("signal: %w", context.Cause(ctx))
	}
	if st := s.Status(); st.Exited {
		return termapi.SignalResult{}, s.Errorf("%w (%s)", termapi.ErrSessionExited, st)
	}
	ctx, cancel := context.WithTimeout(ctx, signalBound)
	defer cancel()
	pgid, err := s.link.ctrl.signal(ctx, sig)
	if errors.Is(err, errControl) {
		return termapi.SignalResult{}, s.Errorf("%w: %s: %v", termapi.ErrUnsupportedSignal, sig, err)
	}
	if err != nil {
		return termapi.SignalResult{}, s.Errorf("%w", err)
	}
	return termapi.SignalResult{TargetPGID: pgid}, nil
}

// Info describes the session for the backend's List.
func (s *session) Info() termapi.Info { return s.Session.Info() }

var _ termapi.Session = (*session)(nil)
