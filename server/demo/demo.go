// Package demo generates the demo data set that `rideapi` seeds into an empty database: four
// cities, their drivers, riders of two accounts and six weeks of trips, the same in every demo
// database.
package demo

import (
	"context"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// Data reports what Seed did. RiderID and DriverID name a rider of store.DefaultAccount and a
// driver with many trips (the driver also has an active trip), so that demo keys for them show
// full lists and a trip to move along; PartnerRiderID names the busiest rider of
// PartnerAccount, the second tenant. All are empty when nothing was seeded.
type Data struct {
	Seeded         bool
	RiderID        string
	DriverID       string
	PartnerRiderID string
}

// PartnerAccount is the demo data's second tenant: a partner business with its own riders
// and trips, which auth.DefaultAccount's keys never see (and the other way round).
const PartnerAccount = "acct_partner"

// Demo data volumes: enough trips that listing, filters and deep pages are worth trying.
const (
	demoDriversPerCity = 16
	demoRiders         = 260
	demoTrips          = 5200
	demoActiveTrips    = 12
	demoHistory        = 6 * 7 * 24 * time.Hour
	demoBatchSize      = 500
)

// demoSeed fixes the generator, so every demo database holds the same ids, people and routes;
// only the times follow the now given to Seed.
var demoSeed = [2]uint64{0x52494445, 0x44454d4f} // "RIDE", "DEMO"

// Seed fills an empty database with the demo data: four cities, drivers, riders and several
// thousand trips over the six weeks before now. It does nothing (Seeded false) when any trip
// exists, so it is safe to call on every start; API keys or other rows alone do not count.
//
// Everything is inserted in one transaction (store.SeedIfEmpty). Two processes seeding at once
// insert the same deterministic ids, so the second fails on a duplicate and reports Seeded false.
//
// The data keeps the store's invariants: each driver and each rider has at most one active
// trip (accepted, arriving or in_progress), and a driver with one is not available.
func Seed(ctx context.Context, st *store.Store, now time.Time) (Data, error) {
	data := generate(now.UTC().Truncate(time.Microsecond))
	seeded, err := st.SeedIfEmpty(ctx, store.Seed{
		Cities: data.cities, Drivers: data.drivers, Riders: data.riders, Trips: data.trips,
	})
	if err != nil || !seeded {
		return Data{}, err
	}
	return Data{Seeded: true, RiderID: data.riderID, DriverID: data.driverID, PartnerRiderID: data.partnerRiderID}, nil
}

// demoCity is a city with what the generator needs to make plausible trips in it.
type demoCity struct {
	store.City
	speedKmh float64 // average driving speed
	streets  []string
	plate    func(r *rand.Rand) string
	address  func(number int, street string) string
}

var demoCities = []demoCity{
	{
		City: store.City{ID: "san-francisco", Name: "San Francisco", CenterLat: 37.7749, CenterLng: -122.4194,
			RadiusMeters: 15000, Currency: "usd", BaseFare: 250, PerKm: 130, PerMinute: 35, MinimumFare: 800},
		speedKmh: 24,
		streets:  []string{"Market St", "Mission St", "Valencia St", "Geary Blvd", "Divisadero St", "Castro St", "Hayes St", "Columbus Ave", "Polk St", "Irving St"},
		plate: func(r *rand.Rand) string {
			return fmt.Sprintf("%d%s%03d", 7+r.IntN(3), letters(r, 3), r.IntN(1000))
		},
		address: func(n int, street string) string { return fmt.Sprintf("%d %s", n, street) },
	},
	{
		City: store.City{ID: "new-york", Name: "New York", CenterLat: 40.7128, CenterLng: -74.0060,
			RadiusMeters: 20000, Currency: "usd", BaseFare: 300, PerKm: 175, PerMinute: 50, MinimumFare: 1000},
		speedKmh: 18,
		streets:  []string{"Broadway", "5th Ave", "Lexington Ave", "Canal St", "W 42nd St", "Houston St", "Bedford Ave", "Amsterdam Ave", "Park Ave", "Atlantic Ave"},
		plate: func(r *rand.Rand) string {
			return fmt.Sprintf("%s-%04d", letters(r, 3), r.IntN(10000))
		},
		address: func(n int, street string) string { return fmt.Sprintf("%d %s", n, street) },
	},
	{
		City: store.City{ID: "london", Name: "London", CenterLat: 51.5074, CenterLng: -0.1278,
			RadiusMeters: 20000, Currency: "gbp", BaseFare: 250, PerKm: 125, PerMinute: 30, MinimumFare: 700},
		speedKmh: 17,
		streets:  []string{"Baker Street", "Oxford Street", "Kingsland Road", "Brixton Road", "Euston Road", "Camden High Street", "Old Kent Road", "King's Road", "Upper Street", "Strand"},
		plate: func(r *rand.Rand) string {
			return fmt.Sprintf("%s%02d %s", letters(r, 2), 60+r.IntN(15), letters(r, 3))
		},
		address: func(n int, street string) string { return fmt.Sprintf("%d %s", n, street) },
	},
	{
		City: store.City{ID: "berlin", Name: "Berlin", CenterLat: 52.5200, CenterLng: 13.4050,
			RadiusMeters: 15000, Currency: "eur", BaseFare: 390, PerKm: 150, PerMinute: 25, MinimumFare: 700},
		speedKmh: 22,
		streets:  []string{"Torstraße", "Friedrichstraße", "Kastanienallee", "Oranienstraße", "Sonnenallee", "Karl-Marx-Allee", "Kurfürstendamm", "Bergmannstraße", "Schönhauser Allee", "Warschauer Straße"},
		plate: func(r *rand.Rand) string {
			return fmt.Sprintf("B-%s %d", letters(r, 2), 1+r.IntN(9999))
		},
		address: func(n int, street string) string { return fmt.Sprintf("%s %d", street, n) },
	},
}

var (
	demoFirstNames = []string{"Amara", "Ben", "Carla", "Dmitri", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jamal",
		"Katja", "Luis", "Maya", "Noah", "Olu", "Priya", "Quentin", "Rosa", "Sami", "Tess",
		"Umar", "Vera", "Wen", "Ximena", "Yusuf", "Zoe", "Aiden", "Bea", "Chidi", "Dana"}
	demoLastNames = []string{"Okafor", "Schmidt", "Nguyen", "Garcia", "Kowalski", "Haddad", "Tanaka", "Silva", "Murphy", "Rossi",
		"Ivanova", "Patel", "Cohen", "Johansson", "Mensah", "Kim", "Dubois", "Moreno", "Fischer", "Osei",
		"Larsen", "Chen", "Novak", "Ali", "Brown", "Weber", "Lopez", "Sato", "Khan", "Byrne"}
	demoVehicles = [][2]string{{"Toyota", "Prius"}, {"Toyota", "Camry"}, {"Honda", "Accord"}, {"Hyundai", "Ioniq 5"},
		{"Tesla", "Model 3"}, {"Kia", "Niro"}, {"Skoda", "Octavia"}, {"Volkswagen", "Passat"},
		{"Ford", "Galaxy"}, {"Mercedes-Benz", "E-Class"}, {"Chevrolet", "Suburban"}, {"Nissan", "Leaf"}}
	demoColors = []string{"Black", "White", "Silver", "Grey", "Blue", "Red", "Dark Green"}
)

// rideTypeMultiplier scales a fare by ride type, in percent.
var rideTypeMultiplier = map[string]int64{store.RideTypeEconomy: 100, store.RideTypeComfort: 135, store.RideTypeXL: 170}

// demoSet is the generated data, ready to insert.
type demoSet struct {
	cities            []store.City
	drivers           []store.Driver
	riders            []store.Rider
	trips             []store.Trip
	riderID, driverID string
	partnerRiderID    string
}

// generate builds the demo data deterministically from demoSeed; times are relative to now.
func generate(now time.Time) demoSet {
	r := rand.New(rand.NewPCG(demoSeed[0], demoSeed[1]))
	var set demoSet

	for _, c := range demoCities {
		city := c.City
		city.CreatedAt = now.Add(-400 * 24 * time.Hour)
		set.cities = append(set.cities, city)
	}

	// Drivers: the same number in every city; cityDrivers[c] indexes set.drivers.
	cityDrivers := make([][]int, len(demoCities))
	for ci, c := range demoCities {
		for range demoDriversPerCity {
			id := demoID(r, "drv_")
			v := demoVehicles[r.IntN(len(demoVehicles))]
			lat, lng := pointNear(r, c.City, 0.8)
			joined := now.Add(-time.Duration(60+r.IntN(700)) * 24 * time.Hour)
			cityDrivers[ci] = append(cityDrivers[ci], len(set.drivers))
			set.drivers = append(set.drivers, store.Driver{
				ID:           id,
				Name:         demoName(r),
				Rating:       float64(420+r.IntN(81)) / 100,
				Photo:        "https://cdn.example.com/drivers/" + id + ".jpg",
				VehicleMake:  v[0],
				VehicleModel: v[1],
				VehicleColor: demoColors[r.IntN(len(demoColors))],
				VehiclePlate: c.plate(r),
				City:         c.ID,
				Lat:          lat,
				Lng:          lng,
				Available:    true,
				Online:       true,
				PositionAt:   &now,
				CreatedAt:    joined,
				UpdatedAt:    now,
			})
		}
	}

	// Riders: each has a home city where they take nearly all their trips.
	cityRiders := make([][]int, len(demoCities))
	for i := range demoRiders {
		ci := i % len(demoCities)
		cityRiders[ci] = append(cityRiders[ci], len(set.riders))
		set.riders = append(set.riders, store.Rider{
			ID:                  demoID(r, "rdr_"),
			Name:                demoName(r),
			Rating:              float64(400+r.IntN(101)) / 100,
			CreatedAt:           now.Add(-time.Duration(50+r.IntN(900)) * 24 * time.Hour),
			DefaultPaymentToken: demoID(r, "tok_"),
		})
	}

	// The first driver and rider of the first city are regulars: they take a larger share of
	// their city's trips and become the demo principals.
	heavyDriver, heavyRider := cityDrivers[0][0], cityRiders[0][0]
	driverTrips := make([]int, len(set.drivers))
	riderTrips := make([]int, len(set.riders))

	// Active trips first, each with its own driver and rider, the regulars' included.
	active := []string{store.TripStatusAccepted, store.TripStatusArriving, store.TripStatusInProgress}
	for i := range demoActiveTrips {
		ci := i % len(demoCities)
		d := cityDrivers[ci][i/len(demoCities)]
		rd := cityRiders[ci][i/len(demoCities)]
		status := active[i%len(active)]
		created := now.Add(-time.Duration(2*60+r.IntN(20*60)) * time.Second)
		t := demoTrip(r, demoCities[ci], &set.drivers[d], set.riders[rd].ID, created, status, now)
		set.drivers[d].Available = false
		set.drivers[d].Lat, set.drivers[d].Lng = t.PickupLat, t.PickupLng
		set.trips = append(set.trips, t)
		driverTrips[d]++
		riderTrips[rd]++
	}

	// History: finished trips spread over six weeks, ending four hours before now so that every
	// completion and cancellation (the longest ride is about two hours) lies in the past.
	span := int64(demoHistory - 4*time.Hour)
	for len(set.trips) < demoTrips {
		ci := r.IntN(len(demoCities))
		d := cityDrivers[ci][r.IntN(demoDriversPerCity)]
		rd := cityRiders[ci][r.IntN(len(cityRiders[ci]))]
		if ci == 0 && r.IntN(8) == 0 {
			d = heavyDriver
		}
		if ci == 0 && r.IntN(12) == 0 {
			rd = heavyRider
		}
		status := store.TripStatusCompleted
		if r.IntN(10) == 0 {
			status = store.TripStatusCancelled
		}
		created := now.Add(-demoHistory + time.Duration(r.Int64N(span)))
		set.trips = append(set.trips, demoTrip(r, demoCities[ci], &set.drivers[d], set.riders[rd].ID, created, status, now))
		driverTrips[d]++
		riderTrips[rd]++
	}

	// Every eighth rider belongs to the partner account, with their trips; the regulars stay
	// with the platform's own.
	partnerTrips := make([]int, len(set.riders))
	for i := range set.riders {
		set.riders[i].Account = store.DefaultAccount
		if i%8 == 7 {
			set.riders[i].Account = PartnerAccount
			partnerTrips[i] = riderTrips[i]
			riderTrips[i] = 0
		}
	}
	accountOf := make(map[string]string, len(set.riders))
	for _, rd := range set.riders {
		accountOf[rd.ID] = rd.Account
	}
	for i := range set.trips {
		set.trips[i].Account = accountOf[set.trips[i].RiderID]
	}

	set.driverID = set.drivers[argmax(driverTrips)].ID
	set.riderID = set.riders[argmax(riderTrips)].ID
	set.partnerRiderID = set.riders[argmax(partnerTrips)].ID
	return set
}

// demoTrip makes one trip of driver d and a rider in city c, booked at created, in status.
func demoTrip(r *rand.Rand, c demoCity, d *store.Driver, riderID string, created time.Time, status string, now time.Time) store.Trip {
	pickLat, pickLng := pointNear(r, c.City, 0.6)
	dropLat, dropLng := pointNear(r, c.City, 0.6)
	roadKm := ride.HaversineMeters(ride.Point{Lat: pickLat, Lng: pickLng}, ride.Point{Lat: dropLat, Lng: dropLng})/1000*1.3 + 0.5
	minutes := roadKm/c.speedKmh*60 + 2
	rideType := store.RideTypeEconomy
	switch n := r.IntN(10); {
	case n >= 9:
		rideType = store.RideTypeXL
	case n >= 6:
		rideType = store.RideTypeComfort
	}
	fare := c.BaseFare + int64(math.Round(float64(c.PerKm)*roadKm+float64(c.PerMinute)*minutes))
	fare = fare * rideTypeMultiplier[rideType] / 100
	fare = max(fare, c.MinimumFare)

	eta := 2 + r.IntN(10)
	pickup := created.Add(time.Duration(eta) * time.Minute)
	ride := time.Duration(minutes * float64(time.Minute)).Truncate(time.Second)

	t := store.Trip{
		ID:             demoID(r, "trp_"),
		Status:         status,
		RideType:       rideType,
		City:           c.ID,
		RiderID:        riderID,
		DriverID:       d.ID,
		PickupLat:      pickLat,
		PickupLng:      pickLng,
		PickupAddress:  demoAddress(r, c),
		DropoffLat:     dropLat,
		DropoffLng:     dropLng,
		DropoffAddress: demoAddress(r, c),
		PickupTime:     pickup,
		FareTotal:      fare,
		FareCurrency:   c.Currency,
		ETAMinutes:     &eta,
		CreatedAt:      created,
		UpdatedAt:      created,
		RoutePolyline:  demoPolyline(r, pickLat, pickLng, dropLat, dropLng),
		MatchingScore:  float64(50+r.IntN(50)) / 100,
		DriverPayout:   fare * 75 / 100,
		PlatformCost:   fare*3/100 + 30, // payment processing
	}
	switch status {
	case store.TripStatusCompleted:
		// Pickups happen a little before or after the promised time.
		actual := pickup.Add(time.Duration(r.IntN(240)-120) * time.Second)
		if actual.Before(created) {
			actual = created
		}
		done := actual.Add(ride)
		t.PickupTime, t.CompletedAt, t.UpdatedAt = actual, &done, done
	case store.TripStatusCancelled:
		at := created.Add(time.Duration(30+r.IntN(eta*60)) * time.Second)
		t.CancelledAt, t.UpdatedAt = &at, at
		t.DriverPayout = 0
		t.PlatformCost = 0
	case store.TripStatusInProgress:
		// Picked up already: pickup_time is the actual time, in the past.
		actual := created.Add(time.Duration(60+r.IntN(60)) * time.Second)
		if actual.After(now) {
			actual = now
		}
		t.PickupTime, t.UpdatedAt = actual, actual
	case store.TripStatusArriving:
		t.UpdatedAt = created.Add(30 * time.Second)
	}
	return t
}

// demoIDEncoding writes ids as the project does: lowercase base32, no padding.
var demoIDEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// demoID makes an id with 128 bits from the demo generator, so demo ids look like real ones
// (prefix + 26 characters) yet are the same in every demo database.
func demoID(r *rand.Rand, prefix string) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], r.Uint64())
	binary.BigEndian.PutUint64(b[8:], r.Uint64())
	return prefix + demoIDEncoding.EncodeToString(b[:])
}

func demoName(r *rand.Rand) string {
	return demoFirstNames[r.IntN(len(demoFirstNames))] + " " + demoLastNames[r.IntN(len(demoLastNames))]
}

// demoAddress is a street address in c, or nil for the trips booked from a map pin.
func demoAddress(r *rand.Rand, c demoCity) *string {
	if r.IntN(7) == 0 {
		return nil
	}
	a := c.address(1+r.IntN(400), c.streets[r.IntN(len(c.streets))])
	return &a
}

func letters(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('A' + r.IntN(26))
	}
	return string(b)
}

// pointNear is a uniformly random point within share of c's radius around its center.
func pointNear(r *rand.Rand, c store.City, share float64) (lat, lng float64) {
	dist := float64(c.RadiusMeters) * share * math.Sqrt(r.Float64())
	angle := 2 * math.Pi * r.Float64()
	const metersPerDegree = 111_320.0
	lat = c.CenterLat + dist*math.Cos(angle)/metersPerDegree
	lng = c.CenterLng + dist*math.Sin(angle)/(metersPerDegree*math.Cos(c.CenterLat*math.Pi/180))
	return math.Round(lat*1e6) / 1e6, math.Round(lng*1e6) / 1e6
}

// demoPolyline is a route from pickup to dropoff through a few jittered waypoints, in Google's
// encoded polyline format (what routing services return and the store keeps internally).
func demoPolyline(r *rand.Rand, lat1, lng1, lat2, lng2 float64) string {
	const steps = 4
	points := make([]ride.Point, 0, steps+1)
	for i := 0; i <= steps; i++ {
		f := float64(i) / steps
		lat, lng := lat1+(lat2-lat1)*f, lng1+(lng2-lng1)*f
		if i > 0 && i < steps {
			lat += (r.Float64() - 0.5) * 0.004
			lng += (r.Float64() - 0.5) * 0.004
		}
		points = append(points, ride.Point{Lat: lat, Lng: lng})
	}
	return ride.EncodePolyline(points)
}

// argmax is the index of the largest count, the first one on ties.
func argmax(counts []int) int {
	best := 0
	for i, n := range counts {
		if n > counts[best] {
			best = i
		}
	}
	return best
}

// FleetReportEvery is how often KeepFleetReporting reports the demo fleet's positions: well
// inside the two minutes after which matching ignores a position.
const FleetReportEvery = 30 * time.Second

// KeepFleetReporting stands in for the demo drivers' apps: every FleetReportEvery each online
// driver reports, again, the position they were last at, so that the demo's drivers stay
// bookable however long the server runs. A driver moved through the API keeps their
// position. It returns when ctx ends.
func KeepFleetReporting(ctx context.Context, st *store.Store) {
	ticker := time.NewTicker(FleetReportEvery)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		_, _ = st.ReportPositionsInPlace(ctx, time.Now())
	}
}
