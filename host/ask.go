package host

import "context"

// Asker asks the person behind a tool call's client for something the
// model must not see, such as a password a program waits for. A front puts
// one in a call's context when its client can be asked (MCP elicitation);
// a tool finds it with AskerFrom. The answer goes to the tool alone: a tool
// must never put it in a result, a log or a file.
type Asker interface {
	// AskSecret shows message to the person and asks for one secret
	// string. It returns when they answer, or with ctx's error.
	AskSecret(ctx context.Context, message string) (Answer, error)
}

// Answer is what the person did with a question.
type Answer struct {
	// Action is AnswerAccept, AnswerDecline or AnswerCancel.
	Action string
	// Secret is the answer when accepted.
	Secret string
}

// The actions of an Answer, as MCP names them.
const (
	AnswerAccept  = "accept"  // the person answered
	AnswerDecline = "decline" // the person refused
	AnswerCancel  = "cancel"  // the person dismissed the question
)

type askerKey struct{}

// WithAsker returns ctx carrying a, for the tool calls run under it.
func WithAsker(ctx context.Context, a Asker) context.Context {
	return context.WithValue(ctx, askerKey{}, a)
}

// AskerFrom returns the Asker of a call's context, or nil when its client
// cannot be asked.
func AskerFrom(ctx context.Context) Asker {
	a, _ := ctx.Value(askerKey{}).(Asker)
	return a
}
