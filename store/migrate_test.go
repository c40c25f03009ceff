package store_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/store"
)

var _ = Describe("Open", func() {
	It("refuses URLs of other engines", func(ctx SpecContext) {
		_, err := store.Open(ctx, "mysql://root@localhost/ride")
		Expect(err).To(MatchError(ContainSubstring(`unsupported database URL scheme "mysql"`)))
	})

	It("carry the same numbers on both engines", func() {
		numbers := func(dir string) []string {
			entries, err := os.ReadDir(filepath.Join("migrations", dir))
			Expect(err).NotTo(HaveOccurred())
			var out []string
			for _, e := range entries {
				number, _, _ := strings.Cut(e.Name(), "_")
				out = append(out, number)
			}
			return out
		}
		Expect(numbers("sqlite")).To(Equal(numbers("postgres")))
	})

	It("refuses a sqlite URL without a path", func(ctx SpecContext) {
		_, err := store.Open(ctx, "sqlite://")
		Expect(err).To(HaveOccurred())
	})
})

var _ = Describe("Migrations", func() {
	forEachEngine(func(e *testEngine) {
		It("apply to an empty database and again as a no-op", func(ctx SpecContext) {
			st := e.fresh(ctx)
			Expect(st.Migrate(ctx)).To(Succeed())
			createTrip(ctx, st, tripOpts{})
			Expect(st.Migrate(ctx)).To(Succeed())

			// The second run changed nothing: the data is still there, one version recorded.
			var trips int64
			Expect(st.TestDB().WithContext(ctx).Model(&store.Trip{}).Count(&trips).Error).To(Succeed())
			Expect(trips).To(BeEquivalentTo(1))
			var versions []int64
			Expect(st.TestDB().WithContext(ctx).Raw(
				"SELECT version_id FROM goose_db_version WHERE is_applied ORDER BY id").
				Scan(&versions).Error).To(Succeed())
			// Each migration recorded once, in order: a second run re-applied none of them.
			Expect(versions).To(ContainElements(int64(0), int64(1), int64(2)))
			Expect(slices.IsSorted(versions)).To(BeTrue())
			Expect(slices.Compact(slices.Clone(versions))).To(HaveLen(len(versions)))
		})

		It("give every row written before accounts existed to the default account", func(ctx SpecContext) {
			st := openStore(ctx, e.newDatabase(ctx))
			Expect(st.MigrateTo(ctx, 7)).To(Succeed())
			now := time.Now().UTC().Truncate(time.Microsecond)
			db := st.TestDB().WithContext(ctx)
			for _, insert := range []struct {
				sql  string
				args []any
			}{
				{`INSERT INTO cities (id, name, center_lat, center_lng, radius_meters, currency, base_fare, per_km, per_minute, minimum_fare, created_at)
					VALUES ('old-town', 'Old Town', 1, 1, 1000, 'usd', 1, 1, 1, 1, ?)`, []any{now}},
				{`INSERT INTO drivers (id, name, rating, photo, vehicle_make, vehicle_model, vehicle_color, vehicle_plate, city, lat, lng, available, created_at, updated_at)
					VALUES ('drv_old', 'D', 5, 'p', 'm', 'm', 'c', 'p', 'old-town', 1, 1, true, ?, ?)`, []any{now, now}},
				{`INSERT INTO riders (id, name, rating, created_at) VALUES ('rdr_old', 'R', 5, ?)`, []any{now}},
				{`INSERT INTO trips (id, status, ride_type, city, rider_id, driver_id, pickup_lat, pickup_lng, dropoff_lat, dropoff_lng,
					pickup_time, fare_total, fare_currency, created_at, updated_at, completed_at)
					VALUES ('trp_old', 'completed', 'economy', 'old-town', 'rdr_old', 'drv_old', 1, 1, 1, 1, ?, 100, 'usd', ?, ?, ?)`, []any{now, now, now, now}},
				{`INSERT INTO events (id, type, subject_id, data, created_at) VALUES ('evt_old', 'trip.completed', 'trp_old', '{}', ?)`, []any{now}},
				{`INSERT INTO api_keys (id, hash, role, subject, account, created_at) VALUES ('key_old', 'abc', 'rider', 'rdr_old', 'acct_default', ?)`, []any{now}},
			} {
				Expect(db.Exec(insert.sql, insert.args...).Error).To(Succeed(), insert.sql)
			}

			Expect(st.Migrate(ctx)).To(Succeed())
			rider, err := st.RiderByID(ctx, "rdr_old")
			Expect(err).NotTo(HaveOccurred())
			Expect(rider.Account).To(Equal(store.DefaultAccount))
			trip, err := st.TripByID(ctx, "trp_old")
			Expect(err).NotTo(HaveOccurred())
			Expect(trip.Account).To(Equal(store.DefaultAccount))
			event, err := st.EventByID(ctx, store.DefaultAccount, "evt_old")
			Expect(err).NotTo(HaveOccurred())
			Expect(event.Account).To(Equal(store.DefaultAccount))
			page, err := st.ListTrips(ctx, store.TripListParams{Filter: store.TripFilter{Account: store.DefaultAccount}, Limit: 5})
			Expect(err).NotTo(HaveOccurred())
			Expect(page.Trips).To(HaveLen(1))
			key, err := st.APIKeyByID(ctx, store.DefaultAccount, "key_old")
			Expect(err).NotTo(HaveOccurred())
			Expect(key.ExpiresAt).To(BeNil())
			Expect(key.RevokedAt).To(BeNil())
		})

		It("give the events a fan-out cursor had not reached yet their deliveries, and nothing twice", func(ctx SpecContext) {
			st := openStore(ctx, e.newDatabase(ctx))
			Expect(st.MigrateTo(ctx, 9)).To(Succeed())
			endpoint := createEndpoint(ctx, st, endpointOpts{CreatedAt: time.Now().Add(-time.Hour)})
			done := appendEvent(ctx, st, "trip.completed", time.Now().Add(-time.Minute))
			waiting := appendEvent(ctx, st, "trip.completed", time.Now())
			db := st.TestDB().WithContext(ctx)
			// The cursor took the first event: its delivery exists, the second one's does not.
			Expect(db.Exec(`INSERT INTO webhook_deliveries (event_id, endpoint_id, status, attempts, due_at, created_at, updated_at)
				VALUES (?, ?, 'succeeded', 1, ?, ?, ?)`, done.ID, endpoint.ID, time.Now(), time.Now(), time.Now()).Error).To(Succeed())
			if st.Engine() == store.EnginePostgres {
				Expect(db.Exec(`UPDATE webhook_fanout SET (last_txid, last_seq) = (SELECT txid, seq FROM events WHERE id = ?)`, done.ID).Error).To(Succeed())
			} else {
				Expect(db.Exec(`UPDATE webhook_fanout SET last_seq = ?`, done.Seq).Error).To(Succeed())
			}

			Expect(st.Migrate(ctx)).To(Succeed())
			claimed := claimAll(ctx, st, time.Now(), time.Minute)
			Expect(claimed).To(HaveLen(1))
			Expect(claimed[0].Event.ID).To(Equal(waiting.ID))
			var deliveries int64
			Expect(db.Raw("SELECT count(*) FROM webhook_deliveries").Scan(&deliveries).Error).To(Succeed())
			Expect(deliveries).To(BeEquivalentTo(2), "the first event's delivery is not made again")
			// Later events fan out as they are written.
			next := appendEvent(ctx, st, "trip.completed", time.Now())
			Expect(claimAll(ctx, st, time.Now(), time.Minute)).To(ConsistOf(HaveField("Event.ID", next.ID)))
		})

		It("give a disabled endpoint the events of the last day it did not get, held until it is enabled", func(ctx SpecContext) {
			st := openStore(ctx, e.newDatabase(ctx))
			Expect(st.MigrateTo(ctx, 12)).To(Succeed())
			paused := createEndpoint(ctx, st, endpointOpts{CreatedAt: time.Now().Add(-72 * time.Hour), Disabled: true})
			other := createEndpoint(ctx, st, endpointOpts{CreatedAt: time.Now().Add(-72 * time.Hour), Events: []string{"trip.created"}})
			appendEvent(ctx, st, "trip.completed", time.Now().Add(-49*time.Hour)) // past the day
			recent := appendEvent(ctx, st, "trip.completed", time.Now().Add(-time.Hour))
			appendEvent(ctx, st, "trip.created", time.Now().Add(-time.Hour)) // not a kind it takes
			Expect(claimAll(ctx, st, time.Now(), time.Minute)).To(ConsistOf(HaveField("EndpointID", other.ID)))

			Expect(st.Migrate(ctx)).To(Succeed())
			Expect(claimAll(ctx, st, time.Now(), time.Minute)).To(BeEmpty(), "held while the endpoint is disabled")
			enabled := store.WebhookEnabled
			_, err := st.UpdateWebhookEndpoint(ctx, paused.Account, paused.ID, store.WebhookEndpointChange{Status: &enabled, Now: time.Now()})
			Expect(err).NotTo(HaveOccurred())
			Expect(claimAll(ctx, st, time.Now(), time.Minute)).To(ConsistOf(And(HaveField("EndpointID", paused.ID), HaveField("Event.ID", recent.ID))))
		})

		It("bring a database of every earlier version up to the newest", func(ctx SpecContext) {
			for _, version := range []int64{1, 5, 9, 10, 11, 12} {
				st := openStore(ctx, e.newDatabase(ctx))
				Expect(st.MigrateTo(ctx, version)).To(Succeed(), "to version %d", version)
				Expect(st.Migrate(ctx)).To(Succeed(), "from version %d", version)
				createTrip(ctx, st, tripOpts{})
			}
		})

		It("run concurrently for several stores in one process", func(ctx SpecContext) {
			// Two databases, plus a second handle on the first: goose state is per call, and
			// the same database migrated twice at once must not fail either.
			url1, url2 := e.newDatabase(ctx), e.newDatabase(ctx)
			stores := []*store.Store{openStore(ctx, url1), openStore(ctx, url1), openStore(ctx, url2)}
			var wg sync.WaitGroup
			errs := make([]error, len(stores))
			for i, st := range stores {
				wg.Go(func() { errs[i] = st.Migrate(ctx) })
			}
			wg.Wait()
			for _, err := range errs {
				Expect(err).NotTo(HaveOccurred())
			}
			for _, st := range stores {
				createTrip(ctx, st, tripOpts{})
			}
		})

		It("reports its engine and answers pings", func(ctx SpecContext) {
			Expect(e.shared.Ping(ctx)).To(Succeed())
			if e.name == "SQLite" {
				Expect(e.shared.Engine()).To(Equal(store.EngineSQLite))
			} else {
				Expect(e.shared.Engine()).To(Equal(store.EnginePostgres))
			}
		})
	})
})
