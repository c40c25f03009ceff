package graphql

import (
	"context"
	"errors"
	"sync"

	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// graphQLBatch is one request's window on the store. Before the document runs, the server reads
// from it every trip and driver id its root fields name; the first resolver that needs a trip
// then loads all of them, with their drivers, in one query, and likewise for drivers. However
// many aliases a document repeats `trip(id: …) { driver { … } }`, it costs one trips query (and
// one drivers query for `driver(id: …)` fields), never one per field.
//
// Unlike a time-window data loader, it never waits for other resolvers: what it batches is
// known from the document before execution starts.
type graphQLBatch struct {
	trips   batchedLookup[store.Trip]
	drivers batchedLookup[store.Driver]
}

type graphQLBatchKey struct{}

func newGraphQLBatch(st *store.Store, reach store.TripReach, a documentAnalysis, variables map[string]any) *graphQLBatch {
	b := &graphQLBatch{}
	b.trips.init(a.rootIDs("trip", ride.PrefixTrip, variables), func(ctx context.Context, ids []string) (map[string]store.Trip, error) {
		trips, err := st.TripsWithin(ctx, ids, reach)
		out := make(map[string]store.Trip, len(trips))
		for _, t := range trips {
			out[t.ID] = t
		}
		return out, err
	})
	b.drivers.init(a.rootIDs("driver", ride.PrefixDriver, variables), func(ctx context.Context, ids []string) (map[string]store.Driver, error) {
		drivers, err := st.DriversByIDs(ctx, ids)
		out := make(map[string]store.Driver, len(drivers))
		for _, d := range drivers {
			out[d.ID] = d
		}
		return out, err
	})
	return b
}

func withGraphQLBatch(ctx context.Context, b *graphQLBatch) context.Context {
	return context.WithValue(ctx, graphQLBatchKey{}, b)
}

func graphQLBatchFrom(ctx context.Context) *graphQLBatch {
	b, _ := ctx.Value(graphQLBatchKey{}).(*graphQLBatch)
	return b
}

// batchedLookup loads a foreseen set of ids once, on first use, and answers lookups from it. An
// id outside the set is loaded on its own.
type batchedLookup[T any] struct {
	ids      []string
	foreseen map[string]bool
	load     func(context.Context, []string) (map[string]T, error)

	once   sync.Once
	loaded map[string]T
	err    error
}

func (l *batchedLookup[T]) init(ids []string, load func(context.Context, []string) (map[string]T, error)) {
	l.ids, l.load = ids, load
	l.foreseen = make(map[string]bool, len(ids))
	for _, id := range ids {
		l.foreseen[id] = true
	}
}

// get returns the record of id, false when none exists.
func (l *batchedLookup[T]) get(ctx context.Context, id string) (T, bool, error) {
	var zero T
	if !l.foreseen[id] {
		one, err := l.load(ctx, []string{id})
		if err != nil {
			return zero, false, err
		}
		v, ok := one[id]
		return v, ok, nil
	}
	l.once.Do(func() { l.loaded, l.err = l.load(ctx, l.ids) })
	if l.err != nil {
		return zero, false, l.err
	}
	v, ok := l.loaded[id]
	return v, ok, nil
}

// trip returns a trip with its driver; false when no trip has this id.
func (b *graphQLBatch) trip(ctx context.Context, id string) (store.Trip, bool, error) {
	if !ride.ValidID(ride.PrefixTrip, id) {
		return store.Trip{}, false, nil
	}
	return b.trips.get(ctx, id)
}

// driver returns a driver; false when no driver has this id.
func (b *graphQLBatch) driver(ctx context.Context, id string) (store.Driver, bool, error) {
	if !ride.ValidID(ride.PrefixDriver, id) {
		return store.Driver{}, false, nil
	}
	return b.drivers.get(ctx, id)
}

// errNoGraphQLBatch means a resolver ran outside runGraphQL, which always installs a batch.
var errNoGraphQLBatch = errors.New("graphql: resolver ran without a request batch")
