package server

import (
	"context"
	"errors"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/store"
)

// GetDriverAvailability tells the driver themself or a platform admin whether the driver is
// online, where they last were and which trip they drive.
func (s *Server) GetDriverAvailability(ctx context.Context, req gen.GetDriverAvailabilityRequestObject) (gen.GetDriverAvailabilityResponseObject, error) {
	if err := mayActAsDriver(auth.PrincipalFrom(ctx), req.DriverId); err != nil {
		return nil, err
	}
	d, err := s.driver(ctx, req.DriverId)
	if err != nil {
		return nil, err
	}
	view, err := s.availabilityView(ctx, d)
	if err != nil {
		return nil, err
	}
	return gen.GetDriverAvailability200JSONResponse{Body: view}, nil
}

// SetDriverAvailability takes a driver online or offline. Offline drivers are not matched; a
// trip under way runs to its end.
func (s *Server) SetDriverAvailability(ctx context.Context, req gen.SetDriverAvailabilityRequestObject) (gen.SetDriverAvailabilityResponseObject, error) {
	if err := mayActAsDriver(auth.PrincipalFrom(ctx), req.DriverId); err != nil {
		return nil, err
	}
	if _, err := s.driver(ctx, req.DriverId); err != nil {
		return nil, err
	}
	d, err := s.storeFor(ctx).SetDriverOnline(ctx, req.DriverId, req.Body.Status == gen.DriverOnline, s.now())
	if err != nil {
		return nil, notFoundAs(err, "driver", req.DriverId)
	}
	view, err := s.availabilityView(ctx, d)
	if err != nil {
		return nil, err
	}
	return gen.SetDriverAvailability200JSONResponse{Body: view}, nil
}

// mayActAsDriver lets the driver themself and the platform's admins through: drivers are the
// platform's shared fleet, so another account's admins see only their public profiles, never
// their availability, position or active trip (which may be another account's).
func mayActAsDriver(caller auth.Principal, driverID string) error {
	if caller.AdministersFleet() || caller.Is(auth.RoleDriver, driverID) {
		return nil
	}
	return forbidden("Only the driver themself or an admin of the platform may do this: drivers are the platform's shared fleet.")
}

// availabilityView is what GET and PUT /v1/drivers/{driverId}/availability answer.
func (s *Server) availabilityView(ctx context.Context, d store.Driver) (gen.DriverAvailability, error) {
	view := gen.DriverAvailability{DriverId: d.ID, Status: gen.DriverOffline, UpdatedAt: d.UpdatedAt.UTC()}
	if d.Online {
		view.Status = gen.DriverOnline
	}
	if p := d.Position(); p != nil {
		at := positionView(*p)
		view.Position = &at
	}
	tripID, err := s.storeFor(ctx).ActiveTripOfDriver(ctx, d.ID)
	switch {
	case err == nil:
		view.ActiveTripId = &tripID
	case !errors.Is(err, store.ErrNotFound):
		return gen.DriverAvailability{}, err
	}
	return view, nil
}
