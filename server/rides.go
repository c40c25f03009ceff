package server

import (
	"context"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/app"
	"github.com/rideapi/ride/server/auth"
)

// CreateRide books a fare estimate (app.Book) and answers the trip with its Location.
func (s *Server) CreateRide(ctx context.Context, req gen.CreateRideRequestObject) (gen.CreateRideResponseObject, error) {
	caller := auth.PrincipalFrom(ctx)
	trip, err := s.app.Book(ctx, caller, app.BookParams{EstimateID: req.Body.EstimateId, RiderID: req.Body.RiderId})
	if err != nil {
		return nil, err
	}
	return gen.CreateRide201JSONResponse{
		Body:    tripView(trip, nil, caller),
		Headers: gen.CreateRide201ResponseHeaders{Location: "/v1/trips/" + trip.ID},
	}, nil
}
