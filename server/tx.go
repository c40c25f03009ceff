package server

import (
	"context"

	"github.com/rideapi/ride/server/pipeline"
	"github.com/rideapi/ride/store"
)

// storeFor is the store a handler must use: the request's transaction when it runs in one,
// else the server's. Writes that span several statements wrap themselves in WithTx on it,
// which nests as a savepoint inside a request transaction.
func (s *Server) storeFor(ctx context.Context) *store.Store {
	if tx := pipeline.RequestTx(ctx); tx != nil {
		return tx
	}
	return s.store
}

// inRequestTx runs fn in the request's transaction, without a savepoint of its own, or in a
// new transaction when the request has none. A savepoint costs a round trip, and is only
// needed where a handler's writes must be undone while the request's transaction commits its
// answer. So fn may fail with a 4xx (an answer the idempotency layer records and commits)
// only before its first write; after it, only with a 5xx, which rolls everything back.
func (s *Server) inRequestTx(ctx context.Context, fn func(tx *store.Store) error) error {
	if tx := pipeline.RequestTx(ctx); tx != nil {
		return fn(tx)
	}
	return s.store.WithTx(ctx, fn)
}
