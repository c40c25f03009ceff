package store

import (
	"context"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rideapi/ride/store/internal/testdb"
)

// BenchmarkTripByIDOverhead is what GORM and database/sql add to the hottest read: the same
// statement, sequentially, through TripByID (GORM's statement, scanned through pgx), through
// database/sql alone (the same pool and scan, without GORM) and through pgx on a pool of its
// own. PostgreSQL only:
// TEST_DATABASE_URL=postgres://… go test -run XXX -bench TripByIDOverhead -benchmem ./store/
func BenchmarkTripByIDOverhead(b *testing.B) {
	st, pool, ids := tripReadBench(b)
	ctx, id := context.Background(), ids[0]

	b.Run("store.TripByID", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := st.TripByID(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("database/sql", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rows, err := st.sqlDB.QueryContext(ctx, st.sql.tripByID, id)
			trips, err := scanTrips(rows, err, 1)
			if err != nil || len(trips) != 1 {
				b.Fatal(err)
			}
		}
	})
	b.Run("pgx", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rows, err := pool.Query(ctx, st.sql.tripByID, id)
			if err != nil {
				b.Fatal(err)
			}
			trips, err := scanTripRows(rows, 1)
			rows.Close()
			if err != nil || len(trips) != 1 {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkTripByIDConcurrent reads random trips from 8 goroutines at once, each read in a
// statement of its own and through TripByID, whose concurrent reads share statements
// (tripReads). PostgreSQL only:
// TEST_DATABASE_URL=postgres://… go test -run XXX -bench TripByIDConcurrent -benchmem ./store/
func BenchmarkTripByIDConcurrent(b *testing.B) {
	st, _, ids := tripReadBench(b)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		read func(id string) (Trip, error)
	}{
		{"one statement per read", func(id string) (Trip, error) { return st.oneTrip(ctx, st.sql.tripByID, []any{id}) }},
		{"shared statements", func(id string) (Trip, error) {
			return st.TripWithin(ctx, id, TripReach{Account: DefaultAccount})
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				r := rand.New(rand.NewPCG(rand.Uint64(), 0))
				for pb.Next() {
					id := ids[r.IntN(len(ids))]
					if t, err := c.read(id); err != nil || t.ID != id {
						b.Errorf("read %s: got %s, %v", id, t.ID, err)
						return
					}
				}
			})
		})
	}
}

// postgresStore opens a new, migrated PostgreSQL database of trips seeded by benchTrips, and
// returns it with its URL; it skips tb without TEST_DATABASE_URL.
func postgresStore(tb testing.TB, trips int) (*Store, string) {
	tb.Helper()
	base := os.Getenv("TEST_DATABASE_URL")
	if base == "" {
		tb.Skip("needs TEST_DATABASE_URL")
	}
	ctx := context.Background()
	url, drop, err := testdb.NewPostgresDatabase(ctx, base)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(drop)
	st, err := Open(ctx, url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	if err := st.Migrate(ctx); err != nil {
		tb.Fatal(err)
	}
	if _, err := st.SeedIfEmpty(ctx, benchTrips(time.Now(), trips)); err != nil {
		tb.Fatal(err)
	}
	return st, url
}

// tripReadBench opens a new PostgreSQL database with 5,000 trips, and a pgx pool on it, and
// returns the ids of its trips.
func tripReadBench(b *testing.B) (*Store, *pgxpool.Pool, []string) {
	b.Helper()
	ctx := context.Background()
	st, url := postgresStore(b, 5000)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	rows, err := pool.Query(ctx, `SELECT id FROM trips ORDER BY id`)
	if err != nil {
		b.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(ids) == 0 {
		b.Fatal("no trips", err)
	}
	return st, pool, ids
}

// benchTrips is n completed trips of one city, spread over its drivers and riders, written
// oldest first.
func benchTrips(now time.Time, n int) Seed {
	now = now.UTC().Truncate(time.Microsecond)
	seed := Seed{Cities: []City{{ID: "bench", Name: "Bench", CenterLat: 37.77, CenterLng: -122.42,
		RadiusMeters: 15000, Currency: "usd", BaseFare: 250, PerKm: 130, PerMinute: 35, MinimumFare: 800, CreatedAt: now}}}
	r := rand.New(rand.NewPCG(1, 2))
	id := func(prefix string) string {
		const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
		b := make([]byte, 26)
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return prefix + string(b)
	}
	for range 20 {
		seed.Drivers = append(seed.Drivers, Driver{ID: id("drv_"), Name: "Driver", Rating: 4.8, Photo: "https://cdn.example.com/d.jpg",
			VehicleMake: "Toyota", VehicleModel: "Prius", VehicleColor: "White", VehiclePlate: "7ABC123", City: "bench",
			Lat: 37.77, Lng: -122.42, Available: true, CreatedAt: now, UpdatedAt: now})
	}
	for range 200 {
		seed.Riders = append(seed.Riders, Rider{ID: id("rdr_"), Name: "Rider", Rating: 4.9, CreatedAt: now})
	}
	address := "1 Market St"
	for i := range n {
		at := now.Add(time.Duration(i-n) * time.Minute)
		done := at.Add(20 * time.Minute)
		seed.Trips = append(seed.Trips, Trip{ID: id("trp_"), Account: DefaultAccount, Status: TripStatusCompleted,
			RideType: RideTypeEconomy, City: "bench", RiderID: seed.Riders[i%200].ID, DriverID: seed.Drivers[i%20].ID,
			PickupLat: 37.78, PickupLng: -122.41, PickupAddress: &address, DropoffLat: 37.76, DropoffLng: -122.43,
			PickupTime: at, FareTotal: 1850, FareCurrency: "usd", CreatedAt: at, UpdatedAt: done, CompletedAt: &done})
	}
	return seed
}

// BenchmarkTripPage reads the first page of 20 trips of an account, newest first, through
// ListTrips, sequentially: the statement a dashboard's list and a driver's trips run, with a
// page of rows to scan (a dozen nullable columns each). PostgreSQL only:
// TEST_DATABASE_URL=postgres://… go test -run XXX -bench TripPage -benchmem ./store/
func BenchmarkTripPage(b *testing.B) {
	st, _, _ := tripReadBench(b)
	ctx := context.Background()
	params := TripListParams{Limit: 20, Filter: TripFilter{Account: DefaultAccount}}
	b.ReportAllocs()
	for b.Loop() {
		page, err := st.ListTrips(ctx, params)
		if err != nil || len(page.Trips) != 20 {
			b.Fatal("page", err)
		}
	}
}
