package pipeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
)

const headerRequestID = "X-Request-Id"

type requestIDKey struct{}

// WithRequestID names the request of ctx; Respond does it for every request.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the id that names this request in responses and logs.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// NewRequestID is random rather than sequential so ids from several replicas never collide.
func NewRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

type clientGoneKey struct{}

// withClientGone keeps, in a context the client's disconnect does not cancel, the signal that
// the client went away.
func withClientGone(ctx context.Context, gone <-chan struct{}) context.Context {
	return context.WithValue(ctx, clientGoneKey{}, gone)
}

// ClientGone is closed when the client of the request that ctx belongs to has disconnected
// (the request itself runs on; see respond.go). Nil outside a request.
func ClientGone(ctx context.Context) <-chan struct{} {
	gone, _ := ctx.Value(clientGoneKey{}).(<-chan struct{})
	return gone
}
