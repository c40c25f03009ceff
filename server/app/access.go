package app

import (
	"context"
	"errors"

	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/problem"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// Who may see and do what. Every answer about a trip, a driver or an estimate, in REST,
// GraphQL and streams alike, asks here.

// TripReach is which trips exist as far as the caller is concerned: a rider's or an admin's,
// those of its account; a driver's, those it drives, whatever their account (drivers are the
// platform's shared fleet and serve every account). Beyond its reach a trip is answered as if
// it did not exist, and every read of a trip is bounded by it in the statement itself.
func TripReach(p auth.Principal) store.TripReach {
	if p.Role == auth.RoleDriver {
		return store.TripReach{DriverID: p.Subject}
	}
	return store.TripReach{Account: p.Account}
}

// CanSeeTrip reports whether the caller may read a trip within its reach: an admin, the trip's
// rider or its driver.
func CanSeeTrip(p auth.Principal, t store.Trip) bool {
	return p.IsAdmin() || p.Is(auth.RoleRider, t.RiderID) || p.Is(auth.RoleDriver, t.DriverID)
}

// SeesRider reports whether caller is shown the rider's public profile on the trip: its
// driver or an admin, while the trip is active.
func SeesRider(t *store.Trip, caller auth.Principal) bool {
	return ride.TripStatus(t.Status).Active() && (caller.IsAdmin() || caller.Is(auth.RoleDriver, t.DriverID))
}

// SeesDriverLocation reports whether caller may see where the trip's driver is: its rider or
// an admin, while the trip is active and the driver has reported a position.
func SeesDriverLocation(t *store.Trip, caller auth.Principal) bool {
	return t.Driver.Position != nil && ride.TripStatus(t.Status).Active() && LocatesDriverOf(caller, t.RiderID)
}

// LocatesDriverOf reports whether caller may see where the driver of riderID's trip is: that
// rider, or an admin.
func LocatesDriverOf(caller auth.Principal, riderID string) bool {
	return caller.IsAdmin() || caller.Is(auth.RoleRider, riderID)
}

// VisibleTrip loads a trip the caller may see: 404 when absent or beyond the caller's reach
// (another account's trip, or for a driver one it does not drive), 403 when someone else's in
// the caller's account. The read itself is bounded by the reach, so a trip beyond it costs what
// a missing one does.
func (a *App) VisibleTrip(ctx context.Context, caller auth.Principal, id string) (store.Trip, error) {
	if !ride.ValidID(ride.PrefixTrip, id) {
		return store.Trip{}, NotFound("trip", id)
	}
	trip, err := a.Store(ctx).TripWithin(ctx, id, TripReach(caller))
	if err != nil {
		return store.Trip{}, NotFoundAs(err, "trip", id)
	}
	if !CanSeeTrip(caller, trip) {
		return store.Trip{}, Forbidden("This trip belongs to another rider or driver.")
	}
	return trip, nil
}

// MayActAsDriver lets the driver themself and the platform's admins through: drivers are the
// platform's shared fleet, so another account's admins see only their public profiles, never
// their availability, position or active trip (which may be another account's).
func MayActAsDriver(caller auth.Principal, driverID string) error {
	if caller.AdministersFleet() || caller.Is(auth.RoleDriver, driverID) {
		return nil
	}
	return Forbidden("Only the driver themself or an admin of the platform may do this: drivers are the platform's shared fleet.")
}

// OwnsEstimate tells whether p may read and book e: its creator (same role, subject and
// account) or an admin of its account.
func OwnsEstimate(p auth.Principal, e store.FareEstimate) bool {
	return p.Account == e.CreatorAccount &&
		(p.IsAdmin() || (p.Role == e.CreatorRole && p.Subject == e.CreatorSubject))
}

// RequireAdmin refuses anyone but an admin: what is one of the API's verbs ("list events").
func RequireAdmin(p auth.Principal, what string) error {
	if !p.IsAdmin() {
		return Forbidden("Only an admin may " + what + ".")
	}
	return nil
}

// Refusals shared by every rule.

// Forbidden is a 403: the caller is known but may not do this.
func Forbidden(detail string) *problem.Error {
	return problem.New(problem.Forbidden, detail)
}

// NotFound answers 404 naming what is missing; an over-long id is cut.
func NotFound(kind, id string) *problem.Error {
	return problem.New(problem.NotFound, "No "+kind+" "+problem.TruncateID(id)+".")
}

// NotFoundAs names the missing resource when err is the store's ErrNotFound.
func NotFoundAs(err error, kind, id string) error {
	if errors.Is(err, store.ErrNotFound) {
		return NotFound(kind, id)
	}
	return err
}
