package main

import (
	"context"
	"crypto/md5"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/glebarez/sqlite"

	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// The embedded default, measured: the read scenarios on the server binary running on an SQLite
// file, as a newcomer who starts rideapi without configuration runs it. The file holds a data set
// of the PostgreSQL one's shape at a size that loads in seconds (-sqlite-trips): as many trips
// per driver (50) and per rider (5), 400 drivers a city, one trip in 500 active. It is written
// through the store's own seeding (store.SeedIfEmpty, which the demo data uses), oldest trip
// first, and without ANALYZE, as a store that grew through the API has none.

// liteDataset is the SQLite data set of n trips.
func liteDataset(n int) dataset {
	d := dataset{Trips: n, Drivers: max(1, n/50), Riders: max(1, n/5), ActiveTrips: n / 500}
	d.Cities = max(1, d.Drivers/400)
	d.Drivers -= d.Drivers % d.Cities
	if d.Riders%7919 == 0 {
		d.Riders++
	}
	return d
}

// loadSQLite makes the file at path hold data set d: it keeps a file that already does, and
// otherwise writes a new one.
func loadSQLite(ctx context.Context, path string, d dataset) error {
	if have, err := liteParams(ctx, path); err == nil && have == d.String() {
		log.Printf("sqlite: %s already holds %s; reusing it", path, d)
		return nil
	}
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	start := time.Now()
	st, err := store.Open(ctx, "sqlite://"+path)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	db, err := sql.Open(sqlite.DriverName, path)
	if err != nil {
		return err
	}
	defer db.Close()
	// As on PostgreSQL, the trips indexes of the migrations are dropped for the load and made
	// again from their own definitions afterwards: one sort each instead of 100,000 insertions.
	indexes, err := liteIndexes(ctx, db)
	if err != nil {
		return err
	}
	for _, i := range indexes {
		if _, err := db.ExecContext(ctx, `DROP INDEX "`+i.name+`"`); err != nil {
			return err
		}
	}
	if _, err := st.SeedIfEmpty(ctx, liteSeed(d)); err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	log.Printf("sqlite: rows written in %.1fs; indexing", time.Since(start).Seconds())
	for _, i := range indexes {
		if _, err := db.ExecContext(ctx, i.def); err != nil {
			return fmt.Errorf("sqlite: %s: %w", i.name, err)
		}
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE ridebench_dataset (params text NOT NULL, loaded_at text NOT NULL)`); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO ridebench_dataset VALUES (?, ?)`, d.String(), time.Now().UTC().Format(time.RFC3339)); err != nil {
		return err
	}
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	log.Printf("sqlite: loaded %s into %s in %.1fs (%.0f MB)", d, path, time.Since(start).Seconds(), float64(info.Size())/1e6)
	return nil
}

// liteParams is the data set an SQLite file holds.
func liteParams(ctx context.Context, path string) (string, error) {
	if _, err := os.Stat(path); err != nil {
		return "", err
	}
	db, err := sql.Open(sqlite.DriverName, path)
	if err != nil {
		return "", err
	}
	defer db.Close()
	var params string
	err = db.QueryRowContext(ctx, `SELECT params FROM ridebench_dataset`).Scan(&params)
	return params, err
}

// liteSeed generates data set d with the PostgreSQL loader's rules (load.go): cities a degree
// apart, driver i in city i mod Cities, trip i with driver i mod Drivers and rider i·7919 mod
// Riders, the first ActiveTrips trips active and newest, of the rest one in ten cancelled,
// created_at spread over 180 days by a hash of i; trips oldest first.
func liteSeed(d dataset) store.Seed {
	var seed store.Seed
	city := func(c int) string { return fmt.Sprintf("bench-%02d", c) }
	for c := range d.Cities {
		seed.Cities = append(seed.Cities, store.City{ID: city(c), Name: fmt.Sprintf("Bench City %d", c),
			CenterLat: float64(-40 + c), CenterLng: float64(-120 + 2*c), RadiusMeters: 25_000, Currency: "usd",
			BaseFare: 250, PerKm: 120, PerMinute: 30, MinimumFare: 700, CreatedAt: benchEpoch})
	}
	drivers := make([]string, d.Drivers)
	for i := range d.Drivers {
		drivers[i] = ride.NewID(ride.PrefixDriver)
		c := i % d.Cities
		seed.Drivers = append(seed.Drivers, store.Driver{ID: drivers[i], Name: fmt.Sprintf("Driver %d", i),
			Rating: 3.5 + float64(i%16)/10, Photo: fmt.Sprintf("https://img.example.com/drivers/%d.jpg", i),
			VehicleMake: []string{"Toyota", "Honda", "Tesla", "Ford"}[i%4], VehicleModel: fmt.Sprintf("Model %d", i%7),
			VehicleColor: []string{"black", "white", "grey", "blue"}[i%4], VehiclePlate: fmt.Sprintf("B%06d", i),
			City: city(c), Lat: float64(-40+c) + 0.01, Lng: float64(-120+2*c) + 0.01, Available: i >= d.ActiveTrips,
			RideTypes: store.AllRideTypes, CreatedAt: benchEpoch, UpdatedAt: benchEpoch})
	}
	riders := make([]string, d.Riders)
	for i := range d.Riders {
		riders[i] = ride.NewID(ride.PrefixRider)
		seed.Riders = append(seed.Riders, store.Rider{ID: riders[i], Account: auth.DefaultAccount,
			Name: fmt.Sprintf("Rider %d", i), Rating: 4 + float64(i%11)/10, CreatedAt: benchEpoch,
			DefaultPaymentToken: fmt.Sprintf("tok_bench_%d", i)})
	}
	seed.Trips = make([]store.Trip, d.Trips)
	for i := range d.Trips {
		sum := md5.Sum(fmt.Appendf(nil, "h%d", i))
		h := int64(binary.BigEndian.Uint64(sum[:8]) >> 16) // the first 12 hex digits, as load.go's
		c := i % d.Cities
		status, created := "completed", benchEpoch.Add(-24*time.Hour-time.Duration(h%15_552_000_000_000)*time.Microsecond)
		switch {
		case i < d.ActiveTrips:
			status, created = []string{"accepted", "arriving", "in_progress"}[i%3], benchEpoch.Add(-time.Duration(i)*time.Second)
		case h%10 == 0:
			status = "cancelled"
		}
		lat, lng := float64(-40+c)+float64(h%1000)/50000, float64(-120+2*c)+float64(h%997)/50000
		fare, eta := 700+h%4000, 2+i%12
		pickup, dropoff := fmt.Sprintf("%d Pickup Street", i), fmt.Sprintf("%d Dropoff Avenue", i)
		t := store.Trip{ID: ride.NewID(ride.PrefixTrip), Account: auth.DefaultAccount, Status: status,
			RideType: rideTypes[i%3], City: city(c), RiderID: riders[(i*7919)%d.Riders], DriverID: drivers[i%d.Drivers],
			PickupLat: lat, PickupLng: lng, PickupAddress: &pickup, DropoffLat: lat + 0.02, DropoffLng: lng + 0.03,
			DropoffAddress: &dropoff, PickupTime: created.Add(time.Duration(eta) * time.Minute), FareTotal: fare,
			FareCurrency: "usd", ETAMinutes: &eta, CreatedAt: created, UpdatedAt: created.Add(30 * time.Minute),
			RoutePolyline: "bench_polyline", MatchingScore: 0.5, DriverPayout: fare * 3 / 4, PlatformCost: fare / 10}
		switch status {
		case "completed":
			at := created.Add(30 * time.Minute)
			t.CompletedAt = &at
		case "cancelled":
			at := created.Add(3 * time.Minute)
			t.CancelledAt = &at
		}
		seed.Trips[i] = t
	}
	slices.SortStableFunc(seed.Trips, func(a, b store.Trip) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return seed
}

// liteSamples reads the rows the read scenarios draw from out of the SQLite file: about one
// trip in twenty, every driver.
func liteSamples(ctx context.Context, path string) (samples, error) {
	var s samples
	db, err := sql.Open(sqlite.DriverName, path)
	if err != nil {
		return s, err
	}
	defer db.Close()
	collect := func(q string) ([]string, error) {
		rows, err := db.QueryContext(ctx, q)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return nil, err
			}
			ids = append(ids, id)
		}
		return ids, rows.Err()
	}
	if s.tripIDs, err = collect(`SELECT id FROM trips WHERE abs(random()) % 20 = 0`); err != nil {
		return s, err
	}
	if s.driverIDs, err = collect(`SELECT id FROM drivers`); err != nil {
		return s, err
	}
	if len(s.tripIDs) == 0 || len(s.driverIDs) == 0 {
		return s, fmt.Errorf("sqlite: %s holds no trips or drivers", path)
	}
	return s, nil
}

// startSQLite loads the SQLite data set, makes an admin key in it and starts the server binary
// on it; it returns the target the read scenarios' SQLite runs go to.
func startSQLite(ctx context.Context, o options) (*target, func(), error) {
	d := liteDataset(o.sqliteTrips)
	if err := loadSQLite(ctx, o.sqlite, d); err != nil {
		return nil, nil, err
	}
	smp, err := liteSamples(ctx, o.sqlite)
	if err != nil {
		return nil, nil, err
	}
	url := "sqlite://" + o.sqlite
	st, err := store.Open(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	keys := keyring{st: st}
	_, err = keys.revokeEarlier(ctx)
	var key string
	if err == nil {
		key, err = keys.create(ctx, auth.RoleAdmin, "")
	}
	st.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("sqlite: %w", err)
	}
	env := append(os.Environ(), "DATABASE_URL="+url, "RIDE_ADDR="+o.sqliteAddr, "RIDE_RATE_LIMIT_READ=0",
		"RIDE_RATE_LIMIT_WRITE=0", "RIDE_DEMO_DATA=false")
	stop, err := startServer(ctx, o.rideapi, env, o.sqliteAddr, "ridebench-sqlite.log", &servers.sqlite)
	if err != nil {
		return nil, nil, err
	}
	log.Printf("sqlite: %d trip ids, %d drivers to draw from", len(smp.tripIDs), len(smp.driverIDs))
	return &target{addr: o.sqliteAddr, key: key, smp: &smp}, stop, nil
}

type liteIndex struct{ name, def string }

// liteIndexes are the trips indexes the migrations made, with their definitions.
func liteIndexes(ctx context.Context, db *sql.DB) ([]liteIndex, error) {
	rows, err := db.QueryContext(ctx, `SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'trips' AND sql IS NOT NULL`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []liteIndex
	for rows.Next() {
		var i liteIndex
		if err := rows.Scan(&i.name, &i.def); err != nil {
			return nil, err
		}
		out = append(out, i)
	}
	return out, rows.Err()
}
