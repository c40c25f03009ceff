package server

import (
	"context"

	"github.com/rideapi/ride/store"
)

type txKey struct{}

// withTx makes st, a transaction-scoped store, the store of every handler below ctx. The
// idempotency layer runs a keyed POST inside one transaction so the recorded answer commits
// with the effect, or neither does.
func withTx(ctx context.Context, st *store.Store) context.Context {
	return context.WithValue(ctx, txKey{}, st)
}

// storeFor is the store a handler must use: the request's transaction when it runs in one,
// else the server's. Writes that span several statements wrap themselves in WithTx on it,
// which nests as a savepoint inside a request transaction.
func (s *Server) storeFor(ctx context.Context) *store.Store {
	if st, ok := ctx.Value(txKey{}).(*store.Store); ok {
		return st
	}
	return s.store
}
