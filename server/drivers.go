package server

import (
	"context"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// GetDriver returns a driver's public profile to any authenticated caller.
func (s *Server) GetDriver(ctx context.Context, req gen.GetDriverRequestObject) (gen.GetDriverResponseObject, error) {
	d, err := s.driver(ctx, req.DriverId)
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

func (s *Server) driver(ctx context.Context, id string) (store.Driver, error) {
	if !ride.ValidID(ride.PrefixDriver, id) {
		return store.Driver{}, notFound("driver", id)
	}
	d, err := s.storeFor(ctx).DriverByID(ctx, id)
	if err != nil {
		return store.Driver{}, notFoundAs(err, "driver", id)
	}
	return d, nil
}
