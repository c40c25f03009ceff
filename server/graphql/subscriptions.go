package graphql

import (
	"context"
	"errors"

	graphql "github.com/graph-gophers/graphql-go"
	gqlerrors "github.com/graph-gophers/graphql-go/errors"

	"github.com/rideapi/ride/store"
)

// TripUpdated is Subscription.tripUpdated: the trip's live state until it is final, for the
// callers who may read the trip (Query.trip's permissions).
func (q *graphQLQuery) TripUpdated(ctx context.Context, args struct{ ID idInput }) (<-chan *tripUpdateNode, error) {
	t, err := q.h.host.Store(ctx).TripWithin(ctx, string(args.ID), q.h.host.TripReach(ctx))
	found := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, q.h.internal(ctx, err)
	}
	// graphql-go passes a *QueryError of a subscription resolver on as it is (any other error
	// loses its extensions), so the refusals are written as such.
	refuse := func(code, message string) error {
		return &gqlerrors.QueryError{Message: message, Path: []any{"tripUpdated"}, Extensions: map[string]any{"code": code}}
	}
	switch {
	case !found:
		return nil, refuse(gqlCodeNotFound, "No trip has this id.")
	case !q.h.host.MayReadTrip(ctx, t):
		return nil, refuse(gqlCodeForbidden, "This trip belongs to another rider or driver.")
	}
	updates := make(chan *tripUpdateNode)
	live := q.h.host.FollowTrip(ctx, t)
	go func() {
		defer close(updates)
		for u := range live {
			select {
			case updates <- &tripUpdateNode{u: u}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return updates, nil
}

// tripUpdateNode resolves TripUpdate.
type tripUpdateNode struct{ u LiveTrip }

func (n *tripUpdateNode) TripID() graphql.ID            { return graphql.ID(n.u.TripID) }
func (n *tripUpdateNode) Status() string                { return graphQLEnum(n.u.Status) }
func (n *tripUpdateNode) UpdatedAt() dateTime           { return dateTime{n.u.UpdatedAt} }
func (n *tripUpdateNode) DriverLocation() *positionNode { return positionOf(n.u.DriverLocation) }

func (n *tripUpdateNode) EtaMinutes() *int32 {
	if n.u.ETAMinutes == nil {
		return nil
	}
	eta := int32(*n.u.ETAMinutes)
	return &eta
}
