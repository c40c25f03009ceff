package tests

import (
	"context"
	"fmt"
	"math"
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

// Test cities are served circles of cityRadius on a grid whose cells are further apart than
// two radii, so that every city has an area of its own: an estimate made in one spec's city is
// never served by another spec's city.
const (
	cityRadius     = 30_000
	cityGridRows   = 100 // latitudes -49.5 … 49.5, one degree (111 km) apart
	cityGridLngGap = 1.5 // degrees; at 50° latitude still 107 km
)

// cityCenter is the grid cell of the n-th city.
func cityCenter(n int64) (lat, lng float64) {
	row, col := n%cityGridRows, (n/cityGridRows)%int64(360/cityGridLngGap)
	return -49.5 + float64(row), -179.25 + float64(col)*cityGridLngGap
}

// NewCity creates a city of its own, so a spec can filter on it and see only its own trips.
// Rates: $2.50 base, $1.20/km, $0.30/min, $7.00 minimum.
func (h *Harness) NewCity(o CityOpts) store.City {
	if o.Currency == "" {
		o.Currency = "usd"
	}
	n := citySeq.Add(1)
	lat, lng := cityCenter(n)
	c, err := h.Store.CreateCity(context.Background(), store.City{
		ID: fmt.Sprintf("test-city-%d-%s", n, ride.NewID("c")[2:10]), Name: "Testville",
		CenterLat: lat, CenterLng: lng, RadiusMeters: cityRadius, Currency: o.Currency,
		BaseFare: 250, PerKm: 120, PerMinute: 30, MinimumFare: 700, CreatedAt: time.Now(),
	})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// DriverOpts shapes a driver.
type DriverOpts struct {
	City string
	// Unavailable marks a driver who is on a trip (or off duty).
	Unavailable bool
	// Offline marks a driver who takes no trips; a new driver is online, with a fresh position.
	Offline bool
	// North and East place the driver this many meters from the city's center.
	North, East float64
}

// NewDriver creates a driver in o.City (a new city when empty), at its center unless placed.
func (h *Harness) NewDriver(o DriverOpts) store.Driver {
	if o.City == "" {
		o.City = h.NewCity(CityOpts{}).ID
	}
	city, err := h.Store.CityByID(context.Background(), o.City)
	Expect(err).NotTo(HaveOccurred())
	at := PointIn(city, o.North, o.East)
	now := time.Now()
	d, err := h.Store.CreateDriver(context.Background(), store.Driver{
		ID: ride.NewID(ride.PrefixDriver), Name: "Test Driver", Rating: 4.8,
		Photo: "https://cdn.ride.example.com/drivers/test.jpg", VehicleMake: "Toyota", VehicleModel: "Prius",
		VehicleColor: "blue", VehiclePlate: "TEST123", City: o.City, Lat: at.Lat, Lng: at.Lng,
		Available: !o.Unavailable, Online: !o.Offline, PositionAt: &now,
		CreatedAt: now, UpdatedAt: now,
	})
	Expect(err).NotTo(HaveOccurred())
	return d
}

// PointIn is the point north and east meters from the city's center (flat-earth, exact enough
// within a city).
func PointIn(c store.City, north, east float64) ride.Point {
	const metersPerDegree = 111_195.0
	return ride.Point{
		Lat: c.CenterLat + north/metersPerDegree,
		Lng: c.CenterLng + east/(metersPerDegree*math.Cos(c.CenterLat*math.Pi/180)),
	}
}

// NewRider creates a rider of the default account with a hidden payment token.
func (h *Harness) NewRider() store.Rider {
	return h.NewRiderIn(store.DefaultAccount)
}

// NewRiderIn creates a rider of the account with a hidden payment token.
func (h *Harness) NewRiderIn(account string) store.Rider {
	r, err := h.Store.CreateRider(context.Background(), store.Rider{
		ID: ride.NewID(ride.PrefixRider), Account: account, Name: "Test Rider", Rating: 4.9, CreatedAt: time.Now(),
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
	switch o.Status {
	case "completed":
		done := o.PickupTime.Add(20 * time.Minute)
		t.CompletedAt = &done
	case "cancelled":
		at := o.CreatedAt.Add(time.Minute)
		t.CancelledAt = &at
	}
	created, err := h.Store.CreateTrip(context.Background(), t)
	Expect(err).NotTo(HaveOccurred())
	return created
}
