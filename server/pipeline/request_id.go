package pipeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"time"

	"github.com/rideapi/ride/server/auth"
)

const headerRequestID = "X-Request-Id"

// requestState is what the layers learn of a request and hand on to later ones: its id and
// client (Respond), its operation and query (the gate).
type requestState struct {
	id        string
	gone      <-chan struct{} // closed when the client has disconnected; nil outside a request
	operation *operationInfo
	query     url.Values // nil until the gate has read a query string that is not empty
	// caller is who the request's key speaks for, once authenticated (by the gate, or by a
	// socket's first message: ObserveSocket); the request's log line names it.
	caller        auth.Principal
	authenticated bool
}

type requestStateKey struct{}

// requestContext is the context Respond gives a request: its parent's values without its
// cancellation, as context.WithoutCancel gives (see Respond), and the request's state, in one
// allocation where a context.WithValue for each would take one apiece.
type requestContext struct {
	parent context.Context
	state  requestState
}

func newRequestContext(parent context.Context, id string) *requestContext {
	return &requestContext{parent: parent, state: requestState{id: id, gone: parent.Done()}}
}

func (*requestContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*requestContext) Done() <-chan struct{}       { return nil }
func (*requestContext) Err() error                  { return nil }
func (c *requestContext) String() string            { return "pipeline.requestContext" }

func (c *requestContext) Value(key any) any {
	if _, ok := key.(requestStateKey); ok {
		return &c.state
	}
	return c.parent.Value(key)
}

// stateOf is the state of ctx's request, or nil for a context no layer made.
func stateOf(ctx context.Context) *requestState {
	s, _ := ctx.Value(requestStateKey{}).(*requestState)
	return s
}

// WithRequestID names the request of ctx, as Respond does for every request.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestStateKey{}, &requestState{id: id})
}

// RequestID returns the id that names this request in responses and logs.
func RequestID(ctx context.Context) string {
	if s := stateOf(ctx); s != nil {
		return s.id
	}
	return ""
}

// NewRequestID is random rather than sequential so ids from several replicas never collide.
func NewRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	var id [len("req_") + 2*len(b)]byte
	copy(id[:], "req_")
	hex.Encode(id[len("req_"):], b[:])
	return string(id[:])
}

// ClientGone is closed when the client of the request that ctx belongs to has disconnected
// (the request itself runs on; see respond.go). Nil outside a request.
func ClientGone(ctx context.Context) <-chan struct{} {
	if s := stateOf(ctx); s != nil {
		return s.gone
	}
	return nil
}
