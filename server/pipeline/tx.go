package pipeline

import (
	"context"

	"github.com/rideapi/ride/store"
)

// withTx makes st, a transaction-scoped store, the store of every handler below ctx. The
// Idempotency layer runs a keyed POST inside one transaction so the recorded answer commits
// with the effect, or neither does.
func withTx(ctx context.Context, st *store.Store) context.Context {
	return store.ContextWithTx(ctx, st)
}
