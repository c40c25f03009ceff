package server

import (
	"context"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/app"
	"github.com/rideapi/ride/server/auth"
)

// GetDriverAvailability tells the driver themself or a platform admin whether the driver is
// online, where they last were and which trip they drive (app.DriverAvailability).
func (s *Server) GetDriverAvailability(ctx context.Context, req gen.GetDriverAvailabilityRequestObject) (gen.GetDriverAvailabilityResponseObject, error) {
	a, err := s.app.DriverAvailability(ctx, auth.PrincipalFrom(ctx), req.DriverId)
	if err != nil {
		return nil, err
	}
	return gen.GetDriverAvailability200JSONResponse{Body: availabilityView(a)}, nil
}

// SetDriverAvailability takes a driver online or offline (app.SetDriverAvailability).
func (s *Server) SetDriverAvailability(ctx context.Context, req gen.SetDriverAvailabilityRequestObject) (gen.SetDriverAvailabilityResponseObject, error) {
	a, err := s.app.SetDriverAvailability(ctx, auth.PrincipalFrom(ctx), req.DriverId, req.Body.Status == gen.DriverOnline)
	if err != nil {
		return nil, err
	}
	return gen.SetDriverAvailability200JSONResponse{Body: availabilityView(a)}, nil
}

// availabilityView is what GET and PUT /v1/drivers/{driverId}/availability answer.
func availabilityView(a app.Availability) gen.DriverAvailability {
	d := a.Driver
	view := gen.DriverAvailability{DriverId: d.ID, Status: gen.DriverOffline, UpdatedAt: d.UpdatedAt.UTC()}
	if d.Online {
		view.Status = gen.DriverOnline
	}
	if p := d.Position(); p != nil {
		at := positionView(*p)
		view.Position = &at
	}
	if a.ActiveTripID != "" {
		view.ActiveTripId = &a.ActiveTripID
	}
	return view
}
