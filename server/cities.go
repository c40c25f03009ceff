package server

import (
	"context"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/ride"
)

// ListCities lists the served cities with their currencies and each ride type's prices.
func (s *Server) ListCities(ctx context.Context, _ gen.ListCitiesRequestObject) (gen.ListCitiesResponseObject, error) {
	cities, err := s.storeFor(ctx).Cities(ctx)
	if err != nil {
		return nil, err
	}
	list := gen.CityList{Data: make([]gen.ServedCity, 0, len(cities))}
	for _, c := range cities {
		city := gen.ServedCity{
			Id: c.ID, Name: c.Name, Currency: c.Currency,
			Center:       gen.Location{Lat: c.CenterLat, Lng: c.CenterLng},
			RadiusMeters: int32(c.RadiusMeters),
			RideTypes:    make([]gen.RideTypePrice, 0, len(ride.AllRideTypes)),
		}
		for _, rt := range ride.AllRideTypes {
			city.RideTypes = append(city.RideTypes, gen.RideTypePrice{
				RideType: gen.RideType(rt), BaseFare: rt.Price(c.BaseFare), PerKm: rt.Price(c.PerKm),
				PerMinute: rt.Price(c.PerMinute), MinimumFare: c.MinimumFare,
			})
		}
		list.Data = append(list.Data, city)
	}
	return gen.ListCities200JSONResponse{Body: list}, nil
}
