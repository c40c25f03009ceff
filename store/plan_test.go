package store_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"gorm.io/gorm"

	"github.com/rideapi/ride/store"
)

// Every trip list page must be a range scan of an index that already yields the page's order,
// so that a page costs the same at any depth. This asks PostgreSQL's planner for the plan of
// the exact SQL ListTrips runs, with sequential scans disabled so that the answer depends on
// the indexes and not on this small table's size: a missing index shows up as a Sort node.
var _ = Describe("Trip list plans", func() {
	for _, e := range engines {
		if e.name != "PostgreSQL" {
			continue
		}
		It("read every equality filter with every sort as an ordered index range scan", func(ctx SpecContext) {
			st := e.fresh(ctx)
			Expect(st.Migrate(ctx)).To(Succeed())
			captured := recordRowQueries(st)

			driver := createDriver(ctx, st, driverOpts{})
			rider := createRider(ctx, st)
			base := time.Now().UTC().Add(-time.Hour)
			var trips []store.Trip
			for i := range 60 {
				trips = append(trips, createTrip(ctx, st, tripOpts{DriverID: driver.ID, RiderID: rider.ID,
					CreatedAt: base.Add(time.Duration(i) * time.Second), Fare: int64(1000 + i)}))
			}
			Expect(st.TestDB().Exec("ANALYZE trips").Error).To(Succeed())

			// The filters the API runs: an admin's lists stay inside its account, a rider's too,
			// a driver's own list spans every account.
			account := store.DefaultAccount
			filters := map[string]store.TripFilter{
				"account": {Account: account}, "status": {Account: account, Status: store.TripStatusCompleted},
				"city": {Account: account, City: driver.City}, "admin's driver": {Account: account, DriverID: driver.ID},
				"driver": {DriverID: driver.ID}, "rider": {Account: account, RiderID: rider.ID},
				"city and time range": {Account: account, City: driver.City, CreatedAfter: &base},
			}
			for name, filter := range filters {
				for _, field := range []store.SortField{store.SortCreatedAt, store.SortPickupTime, store.SortFare} {
					for _, desc := range []bool{true, false} {
						sort := []store.SortKey{{Field: field, Desc: desc}}
						mark := len(captured())
						after := trips[30].Keyset(sort)
						_, err := st.ListTrips(ctx, store.TripListParams{Filter: filter, Sort: sort, After: &after, Limit: 20})
						Expect(err).NotTo(HaveOccurred())
						page := captured()[mark] // the page query; the existence probe follows it
						plan := explain(st, page)
						label := fmt.Sprintf("%s, sort %s desc=%v", name, field, desc)
						if name == "city" && field == store.SortCreatedAt && desc {
							GinkgoWriter.Printf("Plan of a deep page of GET /v1/trips?city=…:\n%s\n%s\n", page.sql, plan)
						}
						Expect(plan).To(ContainSubstring(`"Relation Name": "trips"`), label)
						Expect(plan).To(MatchRegexp(`"Node Type": "Index (Only )?Scan"`), label)
						Expect(plan).NotTo(ContainSubstring(`"Node Type": "Sort"`), "%s needs an index in its order:\n%s", label, plan)
						Expect(plan).NotTo(ContainSubstring(`"Node Type": "Seq Scan"`), label)
					}
				}
			}
		})
	}
})

// The probe for the other direction of a page asks for one row beyond the keyset. Trips are
// inserted oldest first, so created_at follows the rows' order on disk; asked for "any one row
// newer than this" as EXISTS (…), PostgreSQL discards the subquery's ORDER BY and LIMIT, expects
// a sequential scan to meet such a row at once (it assumes they are spread evenly), and in
// fact reads every older row first: a deep page then costs a scan of most of the table. This
// spec loads trips in that order, leaves the planner free (sequential scans on), and checks
// that a deep page, probe included, touches trips only through an index.
var _ = Describe("The existence probe of a deep page", func() {
	for _, e := range engines {
		if e.name != "PostgreSQL" {
			continue
		}
		It("reads the index, not the table, when rows lie on disk in time order", func(ctx SpecContext) {
			// Loading 50,000 trips is one statement that a busy host may run for longer than
			// the read timeout that guards the product's queries.
			st := openStore(ctx, e.newDatabase(ctx), store.WithReadTimeout(time.Minute))
			Expect(st.Migrate(ctx)).To(Succeed())
			captured := recordRowQueries(st)
			driver := createDriver(ctx, st, driverOpts{})
			rider := createRider(ctx, st)
			const n = 50_000
			Expect(st.TestDB().Exec(`INSERT INTO trips (id, status, ride_type, city, rider_id, driver_id, pickup_lat,
				pickup_lng, dropoff_lat, dropoff_lng, pickup_time, fare_total, fare_currency, created_at, updated_at,
				completed_at, route_polyline, matching_score, driver_payout, platform_cost)
				SELECT 'trp_' || lpad(g::text, 26, '0'), 'completed', 'economy', ?, ?, ?, 37.7, -122.4, 37.8, -122.3,
					t, 1850, 'usd', t, t, t, '', 0.9, 1387, 84
				FROM generate_series(1, ?) g, LATERAL (SELECT timestamptz '2026-01-01' + g * interval '1 minute' AS t) at`,
				driver.City, rider.ID, driver.ID, n).Error).To(Succeed())
			Expect(st.TestDB().Exec("ANALYZE trips").Error).To(Succeed())

			for _, backward := range []bool{false, true} {
				for _, filter := range []store.TripFilter{{Account: store.DefaultAccount}, {Account: store.DefaultAccount, Status: store.TripStatusCompleted}} {
					// A cursor n/5 rows from the newest (forward) or the oldest (backward) end.
					at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(n*4/5) * time.Minute)
					if backward {
						at = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(n/5) * time.Minute)
					}
					ks := store.Keyset{Values: []int64{at.UnixMicro()}, ID: "trp_x"}
					params := store.TripListParams{Filter: filter, Limit: 20, After: &ks}
					if backward {
						params.After, params.Before = nil, &ks
					}
					mark := len(captured())
					page, err := st.ListTrips(ctx, params)
					Expect(err).NotTo(HaveOccurred())
					Expect(page.Trips).To(HaveLen(20))
					Expect(page.MoreAfter && page.MoreBefore).To(BeTrue())
					for _, q := range captured()[mark:] {
						plan := explainAsIs(st, q)
						Expect(plan).NotTo(ContainSubstring(`"Node Type": "Seq Scan"`),
							"backward=%v filter=%+v:\n%s\n%s", backward, filter, q.sql, plan)
					}
				}
			}
		})
	}
})

type capturedQuery struct {
	sql  string
	vars []any
}

// recordRowQueries records every statement st reads with Rows (trip pages and their existence
// probes run through the Row callbacks) and returns what it recorded so far.
func recordRowQueries(st *store.Store) func() []capturedQuery {
	var mu sync.Mutex
	var captured []capturedQuery
	Expect(st.TestDB().Callback().Row().After("gorm:row").Register("test:capture", func(db *gorm.DB) {
		mu.Lock()
		defer mu.Unlock()
		captured = append(captured, capturedQuery{sql: db.Statement.SQL.String(), vars: db.Statement.Vars})
	})).To(Succeed())
	return func() []capturedQuery {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(captured)
	}
}

// explain returns PostgreSQL's JSON plan of q with sequential scans disabled.
func explain(st *store.Store, q capturedQuery) string {
	return explainWith(st, q, "off")
}

// explainAsIs returns PostgreSQL's JSON plan of q as the planner would choose it.
func explainAsIs(st *store.Store, q capturedQuery) string {
	return explainWith(st, q, "on")
}

func explainWith(st *store.Store, q capturedQuery, seqscan string) string {
	var plan string
	Expect(st.TestDB().Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("SET LOCAL enable_seqscan = " + seqscan).Error; err != nil {
			return err
		}
		var rows []string
		if err := tx.Raw("EXPLAIN (FORMAT JSON) "+q.sql, q.vars...).Scan(&rows).Error; err != nil {
			return err
		}
		plan = strings.Join(rows, "\n")
		return nil
	})).To(Succeed())
	var pretty any
	Expect(json.Unmarshal([]byte(plan), &pretty)).To(Succeed())
	out, _ := json.MarshalIndent(pretty, "", "  ")
	return strings.ReplaceAll(string(out), `":"`, `": "`)
}

// SQLite's planner guesses without statistics, and its guess for a driver's trips inside an
// account is the account's index: it walks the account's trips until it finds the driver's.
var _ = Describe("SQLite's planner statistics", func() {
	for _, e := range engines {
		if e.name != "SQLite" {
			continue
		}
		It("are brought up to date as the store migrates, so that a driver's trips are read through the driver's index", func(ctx SpecContext) {
			st := e.fresh(ctx)
			Expect(st.Migrate(ctx)).To(Succeed())
			city := createCity(ctx, st, cityOpts{})
			rider := createRider(ctx, st)
			drivers := make([]store.Driver, 20)
			for i := range drivers {
				drivers[i] = createDriver(ctx, st, driverOpts{City: city.ID})
			}
			base := time.Now().UTC().Add(-time.Hour)
			for i := range 400 {
				createTrip(ctx, st, tripOpts{DriverID: drivers[i%len(drivers)].ID, RiderID: rider.ID, City: city.ID,
					CreatedAt: base.Add(time.Duration(i) * time.Second)})
			}
			Expect(st.Migrate(ctx)).To(Succeed(), "as the server does whenever it starts")

			captured := recordRowQueries(st)
			_, err := st.ListTrips(ctx, store.TripListParams{
				Filter: store.TripFilter{Account: store.DefaultAccount, DriverID: drivers[0].ID}, Limit: 20})
			Expect(err).NotTo(HaveOccurred())
			page := captured()[0]
			var plan []struct {
				ID, Parent, NotUsed int
				Detail              string
			}
			Expect(st.TestDB().Raw("EXPLAIN QUERY PLAN "+page.sql, page.vars...).Scan(&plan).Error).To(Succeed())
			var details []string
			for _, step := range plan {
				details = append(details, step.Detail)
			}
			Expect(strings.Join(details, "\n")).To(ContainSubstring("trips_driver_created_at_idx"))
		})
	}
})
