package store_test

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/hex"
	"time"

	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/store"
)

// Factories: each builds a valid row from a few options and defaults for the rest, creating
// whatever it refers to when the options do not name it. No shared fixtures.

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newID is a project-style id: prefix + 26 lowercase base32 characters of 128 random bits.
func newID(prefix string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return prefix + idEncoding.EncodeToString(b)
}

type cityOpts struct {
	ID       string // default: a random slug
	Currency string // default "usd"
}

func createCity(ctx context.Context, st *store.Store, o cityOpts) store.City {
	if o.ID == "" {
		o.ID = "city-" + randomHex(4)
	}
	if o.Currency == "" {
		o.Currency = "usd"
	}
	c, err := st.CreateCity(ctx, store.City{
		ID: o.ID, Name: "Test " + o.ID, CenterLat: 37.77, CenterLng: -122.42, RadiusMeters: 20000,
		Currency: o.Currency, BaseFare: 250, PerKm: 130, PerMinute: 35, MinimumFare: 800,
	})
	Expect(err).NotTo(HaveOccurred())
	return c
}

type driverOpts struct {
	City        string // default: a new city
	Unavailable bool
	Lat, Lng    float64 // default 37.78, -122.41
}

func createDriver(ctx context.Context, st *store.Store, o driverOpts) store.Driver {
	if o.City == "" {
		o.City = createCity(ctx, st, cityOpts{}).ID
	}
	if o.Lat == 0 && o.Lng == 0 {
		o.Lat, o.Lng = 37.78, -122.41
	}
	id := newID("drv_")
	now := time.Now()
	d, err := st.CreateDriver(ctx, store.Driver{
		ID: id, Name: "Test Driver", Rating: 4.87, Photo: "https://cdn.example.com/drivers/" + id + ".jpg",
		VehicleMake: "Toyota", VehicleModel: "Prius", VehicleColor: "Blue", VehiclePlate: "7ABC123",
		City: o.City, Lat: o.Lat, Lng: o.Lng, Available: !o.Unavailable, Online: true, PositionAt: &now,
	})
	Expect(err).NotTo(HaveOccurred())
	return d
}

func createRider(ctx context.Context, st *store.Store) store.Rider {
	r, err := st.CreateRider(ctx, store.Rider{
		ID: newID("rdr_"), Name: "Test Rider", Rating: 4.9, DefaultPaymentToken: "tok_" + randomHex(8),
	})
	Expect(err).NotTo(HaveOccurred())
	return r
}

type tripOpts struct {
	ID         string // default: a new id
	Status     string // default completed
	DriverID   string // default: a new driver in City
	RiderID    string // default: a new rider
	City       string // default: the driver's city, or a new city
	CreatedAt  time.Time
	PickupTime time.Time // default: CreatedAt + 5 minutes
	Fare       int64     // default 1850
}

func createTrip(ctx context.Context, st *store.Store, o tripOpts) store.Trip {
	if o.ID == "" {
		o.ID = newID("trp_")
	}
	if o.Status == "" {
		o.Status = store.TripStatusCompleted
	}
	if o.DriverID == "" {
		d := createDriver(ctx, st, driverOpts{City: o.City})
		o.DriverID, o.City = d.ID, d.City
	}
	if o.City == "" {
		d, err := st.DriverByID(ctx, o.DriverID)
		Expect(err).NotTo(HaveOccurred())
		o.City = d.City
	}
	if o.RiderID == "" {
		o.RiderID = createRider(ctx, st).ID
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
	eta := 4
	pickup := "1 Market St"
	t := store.Trip{
		ID: o.ID, Status: o.Status, RideType: store.RideTypeEconomy, City: o.City,
		RiderID: o.RiderID, DriverID: o.DriverID,
		PickupLat: 37.79, PickupLng: -122.39, PickupAddress: &pickup,
		DropoffLat: 37.76, DropoffLng: -122.42,
		PickupTime: o.PickupTime, FareTotal: o.Fare, FareCurrency: "usd", ETAMinutes: &eta,
		CreatedAt: o.CreatedAt, UpdatedAt: o.CreatedAt,
		RoutePolyline: "_p~iF~ps|U_ulLnnqC", MatchingScore: 0.92,
		DriverPayout: o.Fare * 75 / 100, PlatformCost: 85,
	}
	switch o.Status {
	case store.TripStatusCompleted:
		done := o.PickupTime.Add(20 * time.Minute)
		t.CompletedAt = &done
	case store.TripStatusCancelled:
		at := o.CreatedAt.Add(time.Minute)
		t.CancelledAt = &at
	}
	created, err := st.CreateTrip(ctx, t)
	Expect(err).NotTo(HaveOccurred())
	return created
}

func tripIDs(trips []store.Trip) []string {
	ids := make([]string, len(trips))
	for i, t := range trips {
		ids[i] = t.ID
	}
	return ids
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
