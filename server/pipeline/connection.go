package pipeline

import "context"

// The connection a request came on, for what outlives its request there (a WebSocket).

type connectionKeeperKey struct{}

// WithConnectionKeeper is for the HTTP server's ConnContext when its listener may close a
// connection that serves nobody to make room for a newcomer, as it may a WebSocket that has
// not yet shown a key: keep asks the listener never to close the connection for that again,
// and tells whether it still can (false once it has begun to close it).
func WithConnectionKeeper(ctx context.Context, keep func() bool) context.Context {
	return context.WithValue(ctx, connectionKeeperKey{}, keep)
}

// KeepConnection tells the listener that the connection of ctx's request now serves someone,
// a socket that has authenticated, and must stay until it ends. It is false when the listener
// has already closed it; true when the listener never closes one (no keeper).
func KeepConnection(ctx context.Context) bool {
	keep, ok := ctx.Value(connectionKeeperKey{}).(func() bool)
	return !ok || keep()
}
