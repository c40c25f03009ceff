package app

import (
	"context"
	"errors"

	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// Drivers: the platform's shared fleet. Their public profiles are anyone's to read; their
// availability, position and active trip are the driver's own and the platform's.

// Driver is a driver of the fleet, for any authenticated caller (its public profile is all a
// view may show of it), or a 404.
func (a *App) Driver(ctx context.Context, id string) (store.Driver, error) {
	if !ride.ValidID(ride.PrefixDriver, id) {
		return store.Driver{}, NotFound("driver", id)
	}
	d, err := a.Store(ctx).DriverByID(ctx, id)
	if err != nil {
		return store.Driver{}, NotFoundAs(err, "driver", id)
	}
	return d, nil
}

// Availability is whether a driver is online, where they last were and which trip they drive.
type Availability struct {
	Driver store.Driver
	// ActiveTripID is the trip the driver drives now; empty when none.
	ActiveTripID string
}

// DriverAvailability tells the driver themself or a platform admin the driver's availability.
func (a *App) DriverAvailability(ctx context.Context, caller auth.Principal, driverID string) (Availability, error) {
	if err := MayActAsDriver(caller, driverID); err != nil {
		return Availability{}, err
	}
	d, err := a.Driver(ctx, driverID)
	if err != nil {
		return Availability{}, err
	}
	return a.availability(ctx, d)
}

// SetDriverAvailability takes a driver online or offline, for the driver themself or a
// platform admin. Offline drivers are not matched; a trip under way runs to its end.
func (a *App) SetDriverAvailability(ctx context.Context, caller auth.Principal, driverID string, online bool) (Availability, error) {
	if err := MayActAsDriver(caller, driverID); err != nil {
		return Availability{}, err
	}
	if _, err := a.Driver(ctx, driverID); err != nil {
		return Availability{}, err
	}
	d, err := a.Store(ctx).SetDriverOnline(ctx, driverID, online, a.now())
	if err != nil {
		return Availability{}, NotFoundAs(err, "driver", driverID)
	}
	return a.availability(ctx, d)
}

func (a *App) availability(ctx context.Context, d store.Driver) (Availability, error) {
	tripID, err := a.Store(ctx).ActiveTripOfDriver(ctx, d.ID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return Availability{}, err
	}
	return Availability{Driver: d, ActiveTripID: tripID}, nil
}
