package server

import (
	"context"

	"github.com/rideapi/ride/gen"
)

// GetDriver returns a driver's public profile to any authenticated caller.
func (s *Server) GetDriver(ctx context.Context, req gen.GetDriverRequestObject) (gen.GetDriverResponseObject, error) {
	d, err := s.app.Driver(ctx, req.DriverId)
	if err != nil {
		return nil, err
	}
	return gen.GetDriver200JSONResponse{Body: gen.Driver{
		Id:     d.ID,
		Name:   d.Name,
		Rating: d.Rating,
		Photo:  nonEmpty(d.Photo),
		City:   d.City,
		Vehicle: gen.Vehicle{
			Make: d.VehicleMake, Model: d.VehicleModel, Color: d.VehicleColor, Plate: d.VehiclePlate,
		},
	}}, nil
}
