package mcpfront

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
)

// sessionIDKey is the attribute the SDK logs a session's id under.
const sessionIDKey = "session_id"

// redactSessionIDs wraps the handler the SDK logs to. A session id is a
// credential over HTTP (whoever presents it drives that shell), and the
// SDK logs it at info: the log gets a short hash instead, which still tells
// one session's lines from another's.
func redactSessionIDs(h slog.Handler) slog.Handler { return redactingHandler{h} }

type redactingHandler struct{ next slog.Handler }

func (h redactingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h redactingHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redact(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h redactingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = redact(a)
	}
	return redactingHandler{h.next.WithAttrs(clean)}
}

func (h redactingHandler) WithGroup(name string) slog.Handler {
	return redactingHandler{h.next.WithGroup(name)}
}

func redact(a slog.Attr) slog.Attr {
	if a.Key != sessionIDKey {
		return a
	}
	id := a.Value.String()
	if id == "" {
		return a
	}
	sum := sha256.Sum256([]byte(id))
	return slog.String(sessionIDKey, "sha256:"+hex.EncodeToString(sum[:4]))
}
