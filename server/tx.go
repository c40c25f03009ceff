package server

import (
	"context"

	"github.com/rideapi/ride/store"
)

// storeFor is the store a handler reads with: the request's transaction when it runs in one
// (store.ContextWithTx), else the server's.
func (s *Server) storeFor(ctx context.Context) *store.Store {
	return s.store.Within(ctx)
}
