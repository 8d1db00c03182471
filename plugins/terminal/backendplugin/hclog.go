package backendplugin

import (
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hcLogger hands go-plugin's log records, and the plugin's own (which
// go-plugin reads from its stderr), to a slog.Logger.
type hcLogger struct {
	log  *slog.Logger
	name string
	args []any
}

func newHCLogger(l *slog.Logger) hclog.Logger { return &hcLogger{log: l} }

func (h *hcLogger) emit(level slog.Level, msg string, args []any) {
	all := append(append([]any{}, h.args...), args...)
	if h.name != "" {
		all = append(all, "module", h.name)
	}
	h.log.Log(context.Background(), level, msg, all...)
}

func toSlog(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace, hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func (h *hcLogger) Log(level hclog.Level, msg string, args ...any) {
	h.emit(toSlog(level), msg, args)
}
func (h *hcLogger) Trace(msg string, args ...any) { h.emit(slog.LevelDebug, msg, args) }
func (h *hcLogger) Debug(msg string, args ...any) { h.emit(slog.LevelDebug, msg, args) }
func (h *hcLogger) Info(msg string, args ...any)  { h.emit(slog.LevelInfo, msg, args) }
func (h *hcLogger) Warn(msg string, args ...any)  { h.emit(slog.LevelWarn, msg, args) }
func (h *hcLogger) Error(msg string, args ...any) { h.emit(slog.LevelError, msg, args) }

func (h *hcLogger) IsTrace() bool { return false }
func (h *hcLogger) IsDebug() bool { return h.log.Enabled(context.Background(), slog.LevelDebug) }
func (h *hcLogger) IsInfo() bool  { return h.log.Enabled(context.Background(), slog.LevelInfo) }
func (h *hcLogger) IsWarn() bool  { return h.log.Enabled(context.Background(), slog.LevelWarn) }
func (h *hcLogger) IsError() bool { return h.log.Enabled(context.Background(), slog.LevelError) }

func (h *hcLogger) ImpliedArgs() []any { return h.args }
func (h *hcLogger) With(args ...any) hclog.Logger {
	return &hcLogger{log: h.log, name: h.name, args: append(append([]any{}, h.args...), args...)}
}
func (h *hcLogger) Name() string { return h.name }
func (h *hcLogger) Named(name string) hclog.Logger {
	if h.name != "" {
		name = h.name + "." + name
	}
	return &hcLogger{log: h.log, name: name, args: h.args}
}
func (h *hcLogger) ResetNamed(name string) hclog.Logger {
	return &hcLogger{log: h.log, name: name, args: h.args}
}
func (h *hcLogger) SetLevel(hclog.Level)  {}
func (h *hcLogger) GetLevel() hclog.Level { return hclog.Debug }
func (h *hcLogger) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return slog.NewLogLogger(h.log.Handler(), slog.LevelInfo)
}
func (h *hcLogger) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return h.StandardLogger(nil).Writer()
}
