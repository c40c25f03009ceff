package server

import (
	"context"
	"time"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/app"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// CreateFareEstimate prices a route for a rider or an admin in the city serving its origin, and
// keeps the estimate, owned by the caller, for booking until it expires.
func (s *Server) CreateFareEstimate(ctx context.Context, req gen.CreateFareEstimateRequestObject) (gen.CreateFareEstimateResponseObject, error) {
	caller := auth.PrincipalFrom(ctx)
	if caller.Role != auth.RoleRider && !caller.IsAdmin() {
		return nil, app.Forbidden("Only riders and admins may request fare estimates.")
	}
	body := req.Body
	origin := ride.Point{Lat: body.Origin.Lat, Lng: body.Origin.Lng}
	destination := ride.Point{Lat: body.Destination.Lat, Lng: body.Destination.Lng}
	st := s.storeFor(ctx)
	city, err := servingCity(ctx, st, origin, destination)
	if err != nil {
		return nil, err
	}
	quote := ride.QuoteFare(origin, destination, ride.RideType(body.RideType), ride.Rates{
		Currency: city.Currency, BaseFare: city.BaseFare, PerKm: city.PerKm,
		PerMinute: city.PerMinute, MinimumFare: city.MinimumFare,
	})
	now := s.now()
	est, err := st.CreateFareEstimate(ctx, store.FareEstimate{
		ID:                 ride.NewID(ride.PrefixEstimate),
		RideType:           string(body.RideType),
		City:               city.ID,
		OriginLat:          origin.Lat,
		OriginLng:          origin.Lng,
		OriginAddress:      body.Origin.Address,
		DestinationLat:     destination.Lat,
		DestinationLng:     destination.Lng,
		DestinationAddress: body.Destination.Address,
		DistanceMeters:     quote.DistanceMeters,
		DurationSeconds:    quote.DurationSeconds,
		PriceMin:           quote.Min,
		PriceMax:           quote.Max,
		Currency:           quote.Currency,
		CreatorRole:        caller.Role,
		CreatorSubject:     caller.Subject,
		CreatorAccount:     caller.Account,
		CreatedAt:          now,
		ExpiresAt:          now.Add(s.estimateTTL),
	})
	if err != nil {
		return nil, err
	}
	return gen.CreateFareEstimate201JSONResponse{
		Body:    estimateView(est, now),
		Headers: gen.CreateFareEstimate201ResponseHeaders{Location: "/v1/fare-estimates/" + est.ID},
	}, nil
}

// GetFareEstimate returns an estimate to its creator or an admin, with its status now.
func (s *Server) GetFareEstimate(ctx context.Context, req gen.GetFareEstimateRequestObject) (gen.GetFareEstimateResponseObject, error) {
	if !ride.ValidID(ride.PrefixEstimate, req.EstimateId) {
		return nil, app.NotFound("fare estimate", req.EstimateId)
	}
	est, err := s.storeFor(ctx).FareEstimateByID(ctx, auth.PrincipalFrom(ctx).Account, req.EstimateId)
	if err != nil {
		return nil, app.NotFoundAs(err, "fare estimate", req.EstimateId)
	}
	if !app.OwnsEstimate(auth.PrincipalFrom(ctx), est) {
		return nil, app.Forbidden("A fare estimate is visible to its creator and admins only.")
	}
	return gen.GetFareEstimate200JSONResponse{Body: estimateView(est, s.now())}, nil
}

// servingCity is the served city whose area contains the origin (the nearest center when
// areas overlap); the destination must lie in the same area. Only the cities near the origin's
// latitude can serve it, and only those are returned.
func servingCity(ctx context.Context, st *store.Store, origin, destination ride.Point) (store.City, error) {
	cities, err := st.CitiesAround(ctx, origin.Lat)
	if err != nil {
		return store.City{}, err
	}
	areas := make([]ride.ServiceArea, len(cities))
	byID := make(map[string]store.City, len(cities))
	for i, c := range cities {
		areas[i] = ride.ServiceArea{ID: c.ID, Center: ride.Point{Lat: c.CenterLat, Lng: c.CenterLng}, RadiusMeters: int64(c.RadiusMeters)}
		byID[c.ID] = c
	}
	area, ok := ride.ServiceAreaFor(origin, areas)
	if !ok || !ride.InServiceArea(destination, area) {
		return store.City{}, ride.ErrOutsideServiceArea
	}
	return byID[area.ID], nil
}

// estimateView is the public projection of an estimate at now; the creator stays internal.
func estimateView(e store.FareEstimate, now time.Time) gen.FareEstimate {
	return gen.FareEstimate{
		EstimateId: e.ID,
		Status:     gen.FareEstimateStatus(ride.EstimateStatusAt(now, e.ExpiresAt, e.UsedAt != nil)),
		RideType:   gen.RideType(e.RideType),
		City:       e.City,
		Origin:     gen.Location{Lat: e.OriginLat, Lng: e.OriginLng, Address: e.OriginAddress},
		Destination: gen.Location{
			Lat: e.DestinationLat, Lng: e.DestinationLng, Address: e.DestinationAddress,
		},
		PriceRange:      gen.PriceRange{Min: e.PriceMin, Max: e.PriceMax, Currency: e.Currency},
		DistanceMeters:  e.DistanceMeters,
		DurationSeconds: e.DurationSeconds,
		ExpirySeconds:   int32(e.ExpiresAt.Sub(e.CreatedAt) / time.Second),
		ExpiresAt:       e.ExpiresAt.UTC(),
		CreatedAt:       e.CreatedAt.UTC(),
		TripId:          e.TripID,
	}
}
