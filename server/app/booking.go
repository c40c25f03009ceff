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

// Booking: a fare estimate becomes a trip with the nearest free driver of its city.

// BookParams is a booking: the estimate to book and, for an admin, the rider it is for.
type BookParams struct {
	EstimateID string
	// RiderID is the rider an admin books for; a rider books for themself and may leave it
	// nil or name themself.
	RiderID *string
}

// Book books a fare estimate: in one transaction it consumes the estimate, claims the nearest
// free driver of the estimate's city, creates the trip at the estimate's upper price and writes
// trip.created. Any failure leaves nothing behind. The trip comes back with its driver.
func (a *App) Book(ctx context.Context, caller auth.Principal, p BookParams) (store.Trip, error) {
	riderID, err := bookingRider(caller, p.RiderID)
	if err != nil {
		return store.Trip{}, err
	}
	var trip store.Trip
	err = a.Store(ctx).WithTx(ctx, func(tx *store.Store) error {
		var err error
		trip, err = a.book(ctx, tx, caller, p.EstimateID, riderID)
		return err
	})
	return trip, err
}

// bookingRider is the rider a booking is for: a rider books for themself (naming someone else
// is forbidden), an admin must name the rider, a driver books nothing.
func bookingRider(caller auth.Principal, named *string) (string, error) {
	switch {
	case caller.Role == auth.RoleRider:
		if named != nil && *named != caller.Subject {
			return "", Forbidden("A rider books rides for themself only: leave rider_id out or name yourself.")
		}
		return caller.Subject, nil
	case caller.IsAdmin():
		if named == nil {
			return "", &problem.Error{Code: problem.RiderIDRequired,
				Detail: "An admin books for a rider: name them in rider_id.",
				Fields: []problem.FieldError{{Location: "body.rider_id", Message: "required when an admin books"}}}
		}
		return *named, nil
	}
	return "", Forbidden("Only riders and admins may book rides.")
}

// book runs the booking's steps on tx. The estimate is consumed first: a concurrent booking of
// the same estimate then waits for this one's row lock (PostgreSQL) or transaction (SQLite) and
// is answered estimate_already_used, whatever else it would have failed on.
func (a *App) book(ctx context.Context, tx *store.Store, caller auth.Principal, estimateID, riderID string) (store.Trip, error) {
	now := a.now()
	est, err := bookableEstimate(ctx, tx, caller, estimateID, now)
	if err != nil {
		return store.Trip{}, err
	}
	err = tx.MarkFareEstimateUsed(ctx, store.MarkFareEstimateUsedParams{ID: est.ID, At: now})
	if errors.Is(err, store.ErrConflict) {
		return store.Trip{}, ride.ErrEstimateAlreadyUsed // booked concurrently since it was read
	} else if err != nil {
		return store.Trip{}, err
	}
	if err := checkBookingRider(ctx, tx, caller.Account, riderID); err != nil {
		return store.Trip{}, err
	}

	pickup := ride.Point{Lat: est.OriginLat, Lng: est.OriginLng}
	dropoff := ride.Point{Lat: est.DestinationLat, Lng: est.DestinationLng}
	driver, err := tx.ClaimNearestDriver(ctx, store.ClaimNearestDriverParams{
		City: est.City, RideType: est.RideType, Lat: pickup.Lat, Lng: pickup.Lng,
		FreshSince: now.Add(-ride.PositionFreshness), At: now,
	})
	// ErrConflict: every driver picked was taken before the claim, which only a burst of
	// bookings outside a row lock can cause; to the rider that is no driver either.
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) {
		return store.Trip{}, ride.ErrNoDriverAvailable
	} else if err != nil {
		return store.Trip{}, err
	}
	if err := a.fault(ctx, FaultDriverClaimed, driver.ID); err != nil {
		return store.Trip{}, err
	}
	driverAt := ride.Point{Lat: driver.Lat, Lng: driver.Lng}
	eta := ride.PickupETA(driverAt, pickup)
	etaMinutes := int(eta / time.Minute)

	trip, err := tx.CreateTrip(ctx, store.Trip{
		ID:             ride.NewID(ride.PrefixTrip),
		Account:        caller.Account, // the rider's, checked above
		Status:         string(ride.StatusAccepted),
		RideType:       est.RideType,
		City:           est.City,
		RiderID:        riderID,
		DriverID:       driver.ID,
		PickupLat:      pickup.Lat,
		PickupLng:      pickup.Lng,
		PickupAddress:  est.OriginAddress,
		DropoffLat:     dropoff.Lat,
		DropoffLng:     dropoff.Lng,
		DropoffAddress: est.DestinationAddress,
		PickupTime:     now.Add(eta),
		FareTotal:      est.PriceMax, // the upfront price
		FareCurrency:   est.Currency,
		ETAMinutes:     &etaMinutes,
		CreatedAt:      now,
		UpdatedAt:      now,
		RoutePolyline:  ride.EncodePolyline([]ride.Point{pickup, dropoff}),
		MatchingScore:  ride.MatchingScore(ride.HaversineMeters(driverAt, pickup), driver.Rating),
		DriverPayout:   ride.DriverPayout(est.PriceMax),
		PlatformCost:   ride.PlatformCost(est.PriceMax),
	})
	if err != nil {
		return store.Trip{}, err
	}
	if err := tx.SetFareEstimateTrip(ctx, store.SetFareEstimateTripParams{ID: est.ID, TripID: trip.ID}); err != nil {
		return store.Trip{}, err
	}
	if err := a.appendTripEvent(ctx, tx, trip, now); err != nil {
		return store.Trip{}, err
	}
	trip.Driver = driver.Summary()
	return trip, nil
}

// bookableEstimate loads an estimate the caller may book and checks it can still be booked.
// Someone else's estimate is answered like a missing one, so ids cannot be probed.
func bookableEstimate(ctx context.Context, tx *store.Store, caller auth.Principal, id string, now time.Time) (store.FareEstimate, error) {
	if !ride.ValidID(ride.PrefixEstimate, id) {
		return store.FareEstimate{}, ride.ErrEstimateNotFound
	}
	est, err := tx.FareEstimateByID(ctx, caller.Account, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !OwnsEstimate(caller, est)) {
		return store.FareEstimate{}, ride.ErrEstimateNotFound
	} else if err != nil {
		return store.FareEstimate{}, err
	}
	if err := ride.CheckBookable(now, est.ExpiresAt, est.UsedAt != nil); err != nil {
		return store.FareEstimate{}, err
	}
	return est, nil
}

// checkBookingRider checks the rider exists in the account and has no active trip. The partial
// unique index on trips repeats the second check for a booking of the same rider that commits
// meanwhile. Another account's rider is answered as an unknown one.
func checkBookingRider(ctx context.Context, tx *store.Store, account, riderID string) error {
	unknown := &problem.Error{Code: problem.RiderNotFound,
		Detail: "No rider has this id.",
		Fields: []problem.FieldError{{Location: "body.rider_id", Message: "no such rider"}}}
	if !ride.ValidID(ride.PrefixRider, riderID) {
		return unknown
	}
	busy, err := tx.RiderHasActiveTrip(ctx, account, riderID)
	if errors.Is(err, store.ErrNotFound) {
		return unknown
	} else if err != nil {
		return err
	}
	if busy {
		return ride.ErrRiderHasActiveTrip
	}
	return nil
}
