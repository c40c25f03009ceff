package tests

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

var citySeq atomic.Int64

// CityOpts shapes a city; zero values get working defaults.
type CityOpts struct {
	Currency string
}

// NewCity creates a city of its own, so a spec can filter on it and see only its own trips.
func (h *Harness) NewCity(o CityOpts) store.City {
	if o.Currency == "" {
		o.Currency = "usd"
	}
	c, err := h.Store.CreateCity(context.Background(), store.City{
		ID: fmt.Sprintf("test-city-%d-%s", citySeq.Add(1), ride.NewID("c")[2:10]), Name: "Testville",
		CenterLat: 37.77, CenterLng: -122.42, RadiusMeters: 30_000, Currency: o.Currency,
		BaseFare: 250, PerKm: 120, PerMinute: 30, MinimumFare: 700, CreatedAt: time.Now(),
	})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// DriverOpts shapes a driver.
type DriverOpts struct {
	City string
}

// NewDriver creates a driver in o.City (a new city when empty).
func (h *Harness) NewDriver(o DriverOpts) store.Driver {
	if o.City == "" {
		o.City = h.NewCity(CityOpts{}).ID
	}
	d, err := h.Store.CreateDriver(context.Background(), store.Driver{
		ID: ride.NewID(ride.PrefixDriver), Name: "Test Driver", Rating: 4.8,
		Photo: "https://cdn.ride.example.com/drivers/test.jpg", VehicleMake: "Toyota", VehicleModel: "Prius",
		VehicleColor: "blue", VehiclePlate: "TEST123", City: o.City, Lat: 37.7, Lng: -122.4,
		Available: true, CreatedAt: time.Now(), UpdatedAt: time.Now(),
	})
	Expect(err).NotTo(HaveOccurred())
	return d
}

// NewRider creates a rider with a hidden payment token.
func (h *Harness) NewRider() store.Rider {
	r, err := h.Store.CreateRider(context.Background(), store.Rider{
		ID: ride.NewID(ride.PrefixRider), Name: "Test Rider", Rating: 4.9, CreatedAt: time.Now(),
		DefaultPaymentToken: "tok_SECRET_PAYMENT_TOKEN",
	})
	Expect(err).NotTo(HaveOccurred())
	return r
}

// TripOpts shapes a trip; Driver and Rider are required.
type TripOpts struct {
	Driver     store.Driver
	Rider      store.Rider
	Status     string
	CreatedAt  time.Time
	PickupTime time.Time
	Fare       int64
}

// NewTrip creates a trip with every internal column filled, so leaks would show.
func (h *Harness) NewTrip(o TripOpts) store.Trip {
	if o.Status == "" {
		o.Status = "completed"
	}
	if o.CreatedAt.IsZero() {
		o.CreatedAt = time.Now()
	}
	if o.PickupTime.IsZero() {
		o.PickupTime = o.CreatedAt.Add(5 * time.Minute)
	}
	if o.Fare == 0 {
		o.Fare = 1850
	}
	address := "1 Market St"
	t := store.Trip{
		ID: ride.NewID(ride.PrefixTrip), Status: o.Status, RideType: "economy", City: o.Driver.City,
		RiderID: o.Rider.ID, DriverID: o.Driver.ID,
		PickupLat: 37.79, PickupLng: -122.39, PickupAddress: &address, DropoffLat: 37.76, DropoffLng: -122.42,
		PickupTime: o.PickupTime, FareTotal: o.Fare, FareCurrency: "usd",
		CreatedAt: o.CreatedAt, UpdatedAt: o.CreatedAt,
		RoutePolyline: "SECRET_POLYLINE_o}~pF", MatchingScore: 0.987654, DriverPayout: 1387, PlatformCost: 211,
	}
	if o.Status == "completed" {
		done := o.PickupTime.Add(20 * time.Minute)
		t.CompletedAt = &done
	}
	created, err := h.Store.CreateTrip(context.Background(), t)
	Expect(err).NotTo(HaveOccurred())
	return created
}
