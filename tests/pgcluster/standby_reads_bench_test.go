package pgcluster_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rideapi/ride/server/demo"
	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/tests/pgcluster"
)

// storeBenchDB is a database of the shared topology with the demo data, migrated and seeded by
// the store itself, replayed by the standby.
var storeBenchDB struct {
	once     sync.Once
	name     string
	trips    []string
	keyID    string
	writerID string
	err      error
}

func storeDatabase(b *testing.B, t *pgcluster.Topology) string {
	b.Helper()
	storeBenchDB.once.Do(func() {
		ctx := context.Background()
		storeBenchDB.name = "store_bench"
		if storeBenchDB.err = createDatabase(ctx, t, storeBenchDB.name); storeBenchDB.err != nil {
			return
		}
		st, err := store.Open(ctx, t.PrimaryURL(storeBenchDB.name))
		if err != nil {
			storeBenchDB.err = err
			return
		}
		defer st.Close()
		if err := st.Migrate(ctx); err != nil {
			storeBenchDB.err = err
			return
		}
		if _, err := demo.Seed(ctx, st, time.Now()); err != nil {
			storeBenchDB.err = err
			return
		}
		page, err := st.ListTrips(ctx, store.TripListParams{Filter: store.TripFilter{Account: store.DefaultAccount}, Limit: 100})
		if err != nil {
			storeBenchDB.err = err
			return
		}
		for _, trip := range page.Trips {
			storeBenchDB.trips = append(storeBenchDB.trips, trip.ID)
		}
		storeBenchDB.err = t.CaughtUp(ctx)
	})
	if storeBenchDB.err != nil {
		b.Fatal(storeBenchDB.err)
	}
	return storeBenchDB.name
}

// BenchmarkStandbyReads reads trips by id through the store as the API does, with and without
// the standby serving them, and reports the primary's processor time per 1,000 reads; then the
// reads of a caller who writes before each (its read goes to the primary), for the cost of read
// your writes: the write's recorded position and the read's look-up.
func BenchmarkStandbyReads(b *testing.B) {
	t := benchTopology(b)
	db := storeDatabase(b, t)
	reach := store.TripReach{Account: store.DefaultAccount}
	byID := func(ctx context.Context, st *store.Store, i int) error {
		_, err := st.TripWithin(ctx, storeBenchDB.trips[i%len(storeBenchDB.trips)], reach)
		return err
	}
	page := func(ctx context.Context, st *store.Store, _ int) error {
		_, err := st.ListTrips(ctx, store.TripListParams{Filter: store.TripFilter{Account: store.DefaultAccount, Status: store.TripStatusCompleted}, Limit: 20})
		return err
	}
	for _, c := range []struct {
		name     string
		read     func(context.Context, *store.Store, int) error
		standbys bool
		writes   bool
	}{
		{"by_id/primary", byID, false, false},
		{"by_id/standby", byID, true, false},
		{"page/primary", page, false, false},
		{"page/standby", page, true, false},
		{"by_id/write_then_read", byID, true, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			opts := []store.Option{}
			if c.standbys {
				opts = append(opts, store.WithStandbys([]string{t.StandbyURL(db)}, time.Minute))
			}
			st, err := store.Open(ctx, t.PrimaryURL(db), opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			before, err := t.CPU(pgcluster.Primary)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				if c.writes {
					wctx := store.ReadingAs(ctx, "key_bench_writer", false)
					rider := store.Rider{ID: fmt.Sprintf("rdr_bench%d%d", time.Now().UnixNano(), i), Name: "Bench Rider",
						Rating: 4.8, DefaultPaymentToken: "tok_bench"}
					if _, err := st.CreateRider(wctx, rider); err != nil {
						b.Fatal(err)
					}
				}
				rctx := store.ReadingAs(ctx, "key_bench_reader", true)
				if c.writes {
					rctx = store.ReadingAs(ctx, "key_bench_writer", true)
				}
				if err := c.read(rctx, st, i); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			after, err := t.CPU(pgcluster.Primary)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64((after-before).Microseconds())/float64(b.N)*1000/1000, "primary-cpu-ms/1000reads")
		})
	}
}
