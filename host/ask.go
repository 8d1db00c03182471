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

// InputRequired is what a tool returns, as its error, when it must ask the
// person a question before it can go on and its Asker cannot wait for the
// answer within the call (MCP's multi-round-trip requests, protocol
// 2026-07-28 and later: a server may not ask while it answers a call).
// The front sends the question with the call's result; the client asks the
// person and calls the tool again with the same arguments, and the
// answer: the tool finds it with Resumption, together with State, which
// says where it left off (the waiting program stays as it was meanwhile).
type InputRequired struct {
	// Message is the question.
	Message string
	// State is the tool's own, opaque to everyone else.
	State string
}

func (e *InputRequired) Error() string {
	return "the tool needs the user's answer before it can go on: " + e.Message
}

// Resumption is a call that carries the answer to the question its tool
// asked with InputRequired.
type Resumption struct {
	// State is the InputRequired's State.
	State string
	// Answer is what the person did.
	Answer Answer
}

type resumptionKey struct{}

// WithResumption returns ctx carrying r, for a front.
func WithResumption(ctx context.Context, r Resumption) context.Context {
	return context.WithValue(ctx, resumptionKey{}, r)
}

// ResumptionFrom returns the resumption a call carries, if any.
func ResumptionFrom(ctx context.Context) (Resumption, bool) {
	r, ok := ctx.Value(resumptionKey{}).(Resumption)
	return r, ok
}
