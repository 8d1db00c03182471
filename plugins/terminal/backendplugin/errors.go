package backendplugin

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dshdev/dsh/plugins/terminal/backendplugin/internal/backendpb"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// sentinels are the terminal errors callers branch on, by the name they
// travel under.
var sentinels = map[string]error{
	"no_session":          termapi.ErrNoSession,
	"send_active":         termapi.ErrSendActive,
	"session_closing":     termapi.ErrSessionClosing,
	"session_exited":      termapi.ErrSessionExited,
	"unsupported_signal":  termapi.ErrUnsupportedSignal,
	"no_foreground":       termapi.ErrNoForeground,
	"refuse_kill_shell":   termapi.ErrRefuseKillShell,
	"unsupported":         errors.ErrUnsupported,
	"shell_busy":          termapi.ErrShellBusy,
	"backend_closed":      termapi.ErrBackendClosed,
	"sandbox_unsupported": termapi.ErrSandboxUnsupported,
	"limits_unsupported":  termapi.ErrLimitsUnsupported,
	"invalid_sandbox":     termapi.ErrInvalidSandboxMode,
	"bad_file_name":       termapi.ErrBadFileName,
	"no_unit":             termapi.ErrNoUnit,
	"unresumed":           termapi.ErrUnresumed,
}

// ErrNotConfigured is the answer of a plugin asked to spawn before the
// host configured it: a host that does not speak this protocol.
var ErrNotConfigured = errors.New("backendplugin: the backend is not configured")

// ErrKeeperUnsupported: the executable OpenKeeper started does not serve
// as a keeper (it was built before keepers, or serves the protocol
// without this package's Serve). It still serves as a plugin (Open); its
// sessions are just not kept past dsh.
var ErrKeeperUnsupported = errors.New("backendplugin: the executable cannot serve as a keeper")

// toStatus turns an error of the backend into a gRPC status that keeps what
// callers branch on: the sentinel it matches, the two halves of a
// *termapi.CleanupError, context errors as their codes.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	code := codes.Unknown
	switch {
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, ErrNotConfigured):
		code = codes.FailedPrecondition
	}
	detail := &backendpb.ErrorDetail{}
	for name, sentinel := range sentinels {
		if errors.Is(err, sentinel) {
			detail.Sentinel = name
			break
		}
	}
	var cleanup *termapi.CleanupError
	if errors.As(err, &cleanup) {
		detail.StartError = cleanup.StartErr.Error()
		detail.CleanupError = cleanup.CleanupErr.Error()
	}
	st := status.New(code, err.Error())
	if detail.Sentinel != "" || detail.StartError != "" {
		if withDetail, derr := st.WithDetails(detail); derr == nil {
			st = withDetail
		}
	}
	return st.Err()
}

// remoteError is an error of the backend on the far side: its message as
// the backend wrote it, matching the sentinel it matched there.
type remoteError struct {
	msg  string
	kind error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.kind }

// fromStatus is the inverse of toStatus for an error returned by a call to
// the plugin. An error that is not a status (the plugin is gone, the
// connection broke) is returned as it is, wrapped with op.
func fromStatus(op string, err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("backendplugin: %s: %w", op, err)
	}
	if isConnLoss(st) {
		return fmt.Errorf("backendplugin: %s: %w: %s", op, ErrPluginExited, st.Message())
	}
	switch st.Code() {
	case codes.Canceled:
		return &remoteError{msg: st.Message(), kind: context.Canceled}
	case codes.DeadlineExceeded:
		return &remoteError{msg: st.Message(), kind: context.DeadlineExceeded}
	case codes.Unimplemented:
		// A plugin built before the call was added to the protocol: the
		// session cannot serve it, as the contract says for such calls.
		return &remoteError{msg: st.Message(), kind: errors.ErrUnsupported}
	}
	for _, d := range st.Details() {
		detail, ok := d.(*backendpb.ErrorDetail)
		if !ok {
			continue
		}
		if detail.StartError != "" {
			return &termapi.CleanupError{StartErr: errors.New(detail.StartError), CleanupErr: errors.New(detail.CleanupError)}
		}
		if kind, ok := sentinels[detail.Sentinel]; ok {
			return &remoteError{msg: st.Message(), kind: kind}
		}
	}
	if st.Code() == codes.FailedPrecondition {
		return &remoteError{msg: st.Message(), kind: ErrNotConfigured}
	}
	return &remoteError{msg: st.Message()}
}

// isConnLoss reports a status that gRPC made up because the connection to
// the plugin is gone (it died, or the client was closed), not one the
// plugin sent.
func isConnLoss(st *status.Status) bool {
	switch st.Code() {
	case codes.Unavailable:
		return true
	case codes.Canceled:
		return st.Message() == "grpc: the client connection is closing"
	}
	return false
}
