package server

import (
	"context"
	"errors"
	"time"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/pipeline"
	"github.com/rideapi/ride/server/problem"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// UpdateTrip moves a trip to the status the body names, for its driver or an admin. The same
// status again is a no-op; an If-Match that no longer holds is 412.
func (s *Server) UpdateTrip(ctx context.Context, req gen.UpdateTripRequestObject) (gen.UpdateTripResponseObject, error) {
	trip, err := s.moveTrip(ctx, req.TripId, tripMove{
		to: ride.TripStatus(req.Body.Status),
		authorize: func(p auth.Principal, t store.Trip) error {
			if p.IsAdmin() || p.Is(auth.RoleDriver, t.DriverID) {
				return nil
			}
			if p.Is(auth.RoleRider, t.RiderID) {
				return forbidden("Only the trip's driver or an admin moves a trip; a rider cancels with POST /v1/trips/{tripId}/cancellations.")
			}
			return forbidden("This trip belongs to another rider or driver.")
		},
		precondition: ifMatch(req.Params.IfMatch, auth.PrincipalFrom(ctx)),
	})
	if err != nil {
		return nil, err
	}
	view := tripView(trip, nil, auth.PrincipalFrom(ctx))
	etag, err := representationETag(view)
	if err != nil {
		return nil, err
	}
	return gen.UpdateTrip200JSONResponse{Body: view, Headers: gen.UpdateTrip200ResponseHeaders{ETag: etag}}, nil
}

// CreateTripCancellation cancels a trip that has not started, for its rider, its driver or an
// admin, and records who did and why.
func (s *Server) CreateTripCancellation(ctx context.Context, req gen.CreateTripCancellationRequestObject) (gen.CreateTripCancellationResponseObject, error) {
	caller := auth.PrincipalFrom(ctx)
	var cancellation store.Cancellation
	_, err := s.moveTrip(ctx, req.TripId, tripMove{
		to: ride.StatusCancelled,
		authorize: func(p auth.Principal, t store.Trip) error {
			if canSeeTrip(p, t) {
				return nil
			}
			return forbidden("Only the trip's rider, its driver or an admin may cancel it.")
		},
		repeatIsConflict: true,
		also: func(ctx context.Context, tx *store.Store, t store.Trip, at time.Time) error {
			var err error
			cancellation, err = tx.CreateCancellation(ctx, store.Cancellation{
				ID: ride.NewID(ride.PrefixCancellation), TripID: t.ID, Reason: req.Body.Reason,
				CancelledBy: caller.Role, CreatedAt: at,
			})
			return err
		},
	})
	if err != nil {
		return nil, err
	}
	return gen.CreateTripCancellation201JSONResponse{
		Body: gen.Cancellation{
			Id: cancellation.ID, TripId: cancellation.TripID, Reason: cancellation.Reason,
			CancelledBy: gen.CancelledBy(cancellation.CancelledBy), CreatedAt: cancellation.CreatedAt.UTC(),
		},
		Headers: gen.CreateTripCancellation201ResponseHeaders{Location: "/v1/trips/" + cancellation.TripID},
	}, nil
}

// tripMove is one status change asked of a trip and what the asking operation adds to it.
type tripMove struct {
	to ride.TripStatus
	// authorize refuses callers who may not make the move on this trip.
	authorize func(auth.Principal, store.Trip) error
	// precondition, when set, checks the trip as read (If-Match) before the lifecycle rules.
	precondition func(store.Trip) error
	// repeatIsConflict answers asking for the current status with 409 instead of a no-op: a
	// cancelled trip cannot be cancelled again.
	repeatIsConflict bool
	// also, when set, writes what the move brings along in its transaction.
	also func(ctx context.Context, tx *store.Store, t store.Trip, at time.Time) error
}

// moveTripAttempts bounds the retries of a move whose trip changed between being read and the
// conditional update (PostgreSQL only: SQLite runs one write transaction at a time).
const moveTripAttempts = 3

// moveTrip applies a status change in one transaction: the conditional update of the trip, the
// times the new status sets, the driver's release when it is final, the event and the
// operation's own writes. A trip that moved on concurrently is read again and the move decided
// anew, so that the answer is the no-op, a 409, or the move from the new status.
func (s *Server) moveTrip(ctx context.Context, id string, m tripMove) (store.Trip, error) {
	if !ride.ValidID(ride.PrefixTrip, id) {
		return store.Trip{}, notFound("trip", id)
	}
	for attempt := 1; ; attempt++ {
		var moved store.Trip
		err := s.storeFor(ctx).WithTx(ctx, func(tx *store.Store) error {
			var err error
			moved, err = s.moveTripOnce(ctx, tx, id, m)
			return err
		})
		if errors.Is(err, store.ErrConflict) {
			if attempt < moveTripAttempts {
				continue
			}
			return store.Trip{}, problem.New(problem.InvalidTransition,
				"The trip kept changing while this move was applied. Read it again and retry.")
		}
		return moved, err
	}
}

func (s *Server) moveTripOnce(ctx context.Context, tx *store.Store, id string, m tripMove) (store.Trip, error) {
	trip, err := tx.TripWithin(ctx, id, tripReach(auth.PrincipalFrom(ctx)))
	if err != nil {
		return store.Trip{}, notFoundAs(err, "trip", id)
	}
	if err := m.authorize(auth.PrincipalFrom(ctx), trip); err != nil {
		return store.Trip{}, err
	}
	if m.precondition != nil {
		if err := m.precondition(trip); err != nil {
			return store.Trip{}, err
		}
	}
	from := ride.TripStatus(trip.Status)
	noop, err := ride.CheckTransition(from, m.to)
	if err != nil {
		return store.Trip{}, err
	}
	if noop {
		if m.repeatIsConflict {
			return store.Trip{}, &ride.TransitionError{From: from, To: m.to}
		}
		return trip, nil
	}

	now := s.now()
	change := store.SetTripStatusParams{ID: trip.ID, From: trip.Status, To: string(m.to), At: now}
	switch m.to {
	case ride.StatusInProgress:
		change.PickupTime = &now // the actual pickup replaces the promised one
	case ride.StatusCompleted:
		change.CompletedAt = &now
	case ride.StatusCancelled:
		change.CancelledAt = &now
	}
	if err := tx.SetTripStatus(ctx, change); err != nil {
		return store.Trip{}, err // ErrConflict: moved on concurrently; moveTrip decides again
	}
	if m.to.Final() {
		release := store.ReleaseDriverParams{ID: trip.DriverID, At: now}
		if m.to == ride.StatusCompleted && auth.PrincipalFrom(ctx).Is(auth.RoleDriver, trip.DriverID) {
			// The driver ends the ride where it ends. Anyone else completing it (an admin of the
			// trip's account) does not know where the driver is, and must not move a driver of
			// the shared fleet, whom every account's bookings are matched by.
			release.Lat, release.Lng = &trip.DropoffLat, &trip.DropoffLng
		}
		if err := tx.ReleaseDriver(ctx, release); err != nil {
			return store.Trip{}, err
		}
	}
	if trip, err = tx.TripByID(ctx, id); err != nil {
		return store.Trip{}, err
	}
	if err := appendTripEvent(ctx, tx, trip, now); err != nil {
		return store.Trip{}, err
	}
	if m.also != nil {
		if err := m.also(ctx, tx, trip, now); err != nil {
			return store.Trip{}, err
		}
	}
	return trip, nil
}

// ifMatch is the If-Match precondition: the trip's full representation must still have the
// given ETag, the one GET /v1/trips/{tripId} answers caller.
func ifMatch(header *string, caller auth.Principal) func(store.Trip) error {
	if header == nil {
		return nil
	}
	return func(t store.Trip) error {
		etag, err := representationETag(tripView(t, nil, caller))
		if err != nil {
			return err
		}
		if !pipeline.ETagMatchesStrong(*header, etag) {
			return problem.New(problem.PreconditionFailed,
				"The trip changed since the ETag in If-Match was read. Read it again and decide anew.")
		}
		return nil
	}
}
