package store

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rideapi/ride/store/storetest"
)

// BenchmarkTripByIDOverhead is what GORM and database/sql add to the hottest read: the same
// statement, sequentially, through TripByID, through database/sql alone (the same pool and
// scan, without GORM) and through pgx on a pool of its own. PostgreSQL
// only: TEST_DATABASE_URL=postgres://… go test -run XXX -bench TripByIDOverhead -benchmem ./store/
func BenchmarkTripByIDOverhead(b *testing.B) {
	base := os.Getenv("TEST_DATABASE_URL")
	if base == "" {
		b.Skip("needs TEST_DATABASE_URL")
	}
	ctx := context.Background()
	url, drop, err := storetest.NewPostgresDatabase(ctx, base)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(drop)
	st, err := Open(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	if err := st.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := st.SeedDemo(ctx, time.Now()); err != nil {
		b.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	var id string
	if err := pool.QueryRow(ctx, `SELECT id FROM trips LIMIT 1`).Scan(&id); err != nil {
		b.Fatal(err)
	}

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
			trips, err := scanTrips(st.sqlDB.QueryContext(ctx, st.sql.tripByID, id))
			if err != nil || len(trips) != 1 {
				b.Fatal(err)
			}
		}
	})
	b.Run("pgx", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var t Trip
			d := &t.Driver
			err := pool.QueryRow(ctx, st.sql.tripByID, id).Scan(&t.ID, &t.Status, &t.RideType, &t.City, &t.RiderID,
				&t.DriverID, &t.PickupLat, &t.PickupLng, &t.PickupAddress, &t.DropoffLat, &t.DropoffLng,
				&t.DropoffAddress, &t.PickupTime, &t.FareTotal, &t.FareCurrency, &t.ETAMinutes,
				&t.CreatedAt, &t.UpdatedAt, &t.CompletedAt, &t.CancelledAt, &t.RoutePolyline,
				&t.MatchingScore, &t.DriverPayout, &t.PlatformCost, &d.Name, &d.Rating, &d.Photo)
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
