package server

import (
	"context"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/app"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/ride"
)

// GetRider returns a rider to themself or an admin. Anyone else is refused before the lookup,
// so a 403 never tells whether the id exists.
func (s *Server) GetRider(ctx context.Context, req gen.GetRiderRequestObject) (gen.GetRiderResponseObject, error) {
	caller := auth.PrincipalFrom(ctx)
	if !caller.IsAdmin() && !caller.Is(auth.RoleRider, req.RiderId) {
		return nil, app.Forbidden("Only the rider themself or an admin may read a rider.")
	}
	if !ride.ValidID(ride.PrefixRider, req.RiderId) {
		return nil, app.NotFound("rider", req.RiderId)
	}
	r, err := s.storeFor(ctx).RiderOfAccount(ctx, caller.Account, req.RiderId)
	if err != nil {
		return nil, app.NotFoundAs(err, "rider", req.RiderId)
	}
	return gen.GetRider200JSONResponse{Body: gen.Rider{
		Id: r.ID, Name: r.Name, Rating: r.Rating, CreatedAt: r.CreatedAt.UTC(),
	}}, nil
}
