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
	if tx := requestTx(ctx); tx != nil {
		return tx
	}
	return s.store
}

// requestTx is the transaction the request runs in, or nil.
func requestTx(ctx context.Context) *store.Store {
	tx, _ := ctx.Value(txKey{}).(*store.Store)
	return tx
}

// inRequestTx runs fn in the request's transaction, without a savepoint of its own, or in a
// new transaction when the request has none. A savepoint costs a round trip, and is only
// needed where a handler's writes must be undone while the request's transaction commits its
// answer. So fn may fail with a 4xx (an answer the idempotency layer records and commits)
// only before its first write; after it, only with a 5xx, which rolls everything back.
func (s *Server) inRequestTx(ctx context.Context, fn func(tx *store.Store) error) error {
	if tx := requestTx(ctx); tx != nil {
		return fn(tx)
	}
	return s.store.WithTx(ctx, fn)
}
