package app

import (
	"context"
	"errors"
	"time"

	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/problem"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// The trip lifecycle: moves along the state machine of package ride, and cancellation.

// MoveTripParams is a status change asked of a trip.
type MoveTripParams struct {
	TripID string
	To     ride.TripStatus
	// Precondition, when set, checks the trip as read (an If-Match) before the lifecycle
	// rules; its error is the answer.
	Precondition func(store.Trip) error
}

// MoveTrip moves a trip to p.To, for its driver or an admin. The same status again is a no-op
// that returns the trip as it is.
func (a *App) MoveTrip(ctx context.Context, caller auth.Principal, p MoveTripParams) (store.Trip, error) {
	return a.moveTrip(ctx, caller, p.TripID, tripMove{
		to: p.To,
		authorize: func(t store.Trip) error {
			if caller.IsAdmin() || caller.Is(auth.RoleDriver, t.DriverID) {
				return nil
			}
			if caller.Is(auth.RoleRider, t.RiderID) {
				return Forbidden("Only the trip's driver or an admin moves a trip; a rider cancels with POST /v1/trips/{tripId}/cancellations.")
			}
			return Forbidden("This trip belongs to another rider or driver.")
		},
		precondition: p.Precondition,
	})
}

// CancelTrip cancels a trip that has not started, for its rider, its driver or an admin, and
// records who did and why.
func (a *App) CancelTrip(ctx context.Context, caller auth.Principal, tripID, reason string) (store.Cancellation, error) {
	var cancellation store.Cancellation
	_, err := a.moveTrip(ctx, caller, tripID, tripMove{
		to: ride.StatusCancelled,
		authorize: func(t store.Trip) error {
			if CanSeeTrip(caller, t) {
				return nil
			}
			return Forbidden("Only the trip's rider, its driver or an admin may cancel it.")
		},
		repeatIsConflict: true,
		also: func(ctx context.Context, tx *store.Store, t store.Trip, at time.Time) error {
			var err error
			cancellation, err = tx.CreateCancellation(ctx, store.Cancellation{
				ID: ride.NewID(ride.PrefixCancellation), TripID: t.ID, Reason: reason,
				CancelledBy: caller.Role, CreatedAt: at,
			})
			return err
		},
	})
	return cancellation, err
}

// tripMove is one status change asked of a trip and what the asking operation adds to it.
type tripMove struct {
	to ride.TripStatus
	// authorize refuses callers who may not make the move on this trip.
	authorize func(store.Trip) error
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
func (a *App) moveTrip(ctx context.Context, caller auth.Principal, id string, m tripMove) (store.Trip, error) {
	if !ride.ValidID(ride.PrefixTrip, id) {
		return store.Trip{}, NotFound("trip", id)
	}
	for attempt := 1; ; attempt++ {
		var moved store.Trip
		err := a.Store(ctx).WithTx(ctx, func(tx *store.Store) error {
			var err error
			moved, err = a.moveTripOnce(ctx, tx, caller, id, m)
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

func (a *App) moveTripOnce(ctx context.Context, tx *store.Store, caller auth.Principal, id string, m tripMove) (store.Trip, error) {
	trip, err := tx.TripWithin(ctx, id, TripReach(caller))
	if err != nil {
		return store.Trip{}, NotFoundAs(err, "trip", id)
	}
	if err := m.authorize(trip); err != nil {
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

	now := a.now()
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
		if m.to == ride.StatusCompleted && caller.Is(auth.RoleDriver, trip.DriverID) {
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
	if err := a.appendTripEvent(ctx, tx, trip, now); err != nil {
		return store.Trip{}, err
	}
	if m.also != nil {
		if err := m.also(ctx, tx, trip, now); err != nil {
			return store.Trip{}, err
		}
	}
	return trip, nil
}
