package store_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
			captured := recordQueries(st)

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
			captured := recordQueries(st)
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

// A booking asks whether its rider has an active trip and which of the city's free drivers has
// none; a driver's position report and a refused insert ask the same of one driver or rider.
// Each question is for the partial indexes on active trips, and PostgreSQL may answer a
// prepared statement with its generic plan, made without the statement's parameters: with the
// statuses among them, the planner cannot use an index whose predicate names them, and reads
// every trip of the driver (or rider) instead. This asks for the generic plan of each such
// statement and wants the driver's (rider's) active trip looked up in its own index.
var _ = Describe("Active-trip checks", func() {
	for _, e := range engines {
		if e.name != "PostgreSQL" {
			continue
		}
		It("look the driver or rider up in the partial index on active trips, even in a generic plan", func(ctx SpecContext) {
			st := e.fresh(ctx)
			Expect(st.Migrate(ctx)).To(Succeed())
			captured := recordQueries(st)
			city := createCity(ctx, st, cityOpts{})
			driver := createDriver(ctx, st, driverOpts{City: city.ID})
			busy := createDriver(ctx, st, driverOpts{City: city.ID})
			rider, freeRider := createRider(ctx, st), createRider(ctx, st)
			active := createTrip(ctx, st, tripOpts{DriverID: busy.ID, RiderID: rider.ID, Status: store.TripStatusAccepted})
			// Other active trips, so that reading all of them is not as cheap as the lookup, and
			// the driver's past trips: what a plan without the index reads.
			for range 200 {
				createTrip(ctx, st, tripOpts{City: city.ID, Status: store.TripStatusInProgress})
			}
			for range 40 {
				createTrip(ctx, st, tripOpts{DriverID: driver.ID, RiderID: freeRider.ID})
			}
			Expect(st.TestDB().Exec("ANALYZE trips").Error).To(Succeed())

			mark := len(captured())
			has, err := st.RiderHasActiveTrip(ctx, store.DefaultAccount, rider.ID)
			Expect(err).NotTo(HaveOccurred())
			Expect(has).To(BeTrue())
			trip, err := st.ActiveTripOfDriver(ctx, busy.ID)
			Expect(err).NotTo(HaveOccurred())
			Expect(trip).To(Equal(active.ID))
			Expect(st.WithTx(ctx, func(tx *store.Store) error {
				_, err := tx.ClaimNearestDriver(ctx, store.ClaimNearestDriverParams{City: city.ID, RideType: "economy",
					Lat: 37.78, Lng: -122.41, FreshSince: time.Now().Add(-time.Hour), At: time.Now()})
				return err
			})).To(Succeed())
			refused := func(riderID string) error {
				_, err := st.CreateTrip(ctx, store.Trip{ID: newID("trp_"), Account: store.DefaultAccount,
					Status: store.TripStatusAccepted, RideType: "economy", City: city.ID, RiderID: riderID, DriverID: busy.ID,
					PickupLat: 37.7, PickupLng: -122.4, DropoffLat: 37.8, DropoffLng: -122.3, PickupTime: time.Now(),
					FareTotal: 1850, FareCurrency: "usd"})
				return err
			}
			Expect(refused(rider.ID)).To(MatchError(store.ErrRiderHasActiveTrip))
			Expect(refused(freeRider.ID)).To(MatchError(store.ErrDriverHasActiveTrip))

			checks := captured()[mark:]
			now := time.Now()
			checks = append(checks, capturedQuery{sql: store.RecordPositionSQL,
				vars: []any{busy.ID, 37.7, -122.4, 90.0, 5.0, now, busy.ID, now, busy.ID}})
			lookups := regexp.MustCompile(`(driver|rider)_id = (\?|\$1|drivers\.id|riders\.id) AND (trips\.)?status IN`)
			asked := map[string]int{}
			for _, q := range checks {
				m := lookups.FindStringSubmatch(q.sql)
				if m == nil {
					continue
				}
				who := m[1]
				asked[who]++
				plan := explainGeneric(st, q)
				Expect(indexConditions(plan)).To(HaveKeyWithValue("trips_active_"+who+"_idx", HavePrefix("("+who+"_id = ")),
					"%s\n%s", q.sql, plan)
			}
			// The rider's check and both refused inserts (the rider goes first); the driver's
			// trip, the claim, the second refused insert and the position report.
			Expect(asked).To(Equal(map[string]int{"rider": 3, "driver": 4}))
		})
	}
})

// explainGeneric returns PostgreSQL's JSON plan of q as a prepared statement's generic plan
// (the plan made without the values of its parameters), with sequential scans disabled.
func explainGeneric(st *store.Store, q capturedQuery) string {
	args := make([]string, len(q.vars))
	for i, v := range q.vars {
		switch v := v.(type) {
		case string:
			args[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
		case time.Time:
			args[i] = "'" + v.UTC().Format(time.RFC3339Nano) + "'"
		default:
			args[i] = fmt.Sprint(v)
		}
	}
	name := fmt.Sprintf("generic_check_%d", genericChecks.Add(1))
	return planOf(st, []string{
		"SET LOCAL plan_cache_mode = force_generic_plan",
		"SET LOCAL enable_seqscan = off", // as explain: this small table would otherwise be read whole
		"PREPARE " + name + " AS " + q.sql,
	}, "EXPLAIN (FORMAT JSON) EXECUTE "+name+"("+strings.Join(args, ", ")+")", nil, "DEALLOCATE "+name)
}

// genericChecks names each explainGeneric's prepared statement: one left behind by a failed
// check must not collide with the next.
var genericChecks atomic.Int64

// indexConditions maps each index a plan (explain's JSON) reads to the condition it looks up.
func indexConditions(plan string) map[string]string {
	var nodes []struct{ Plan planNode }
	Expect(json.Unmarshal([]byte(plan), &nodes)).To(Succeed())
	conds := map[string]string{}
	var walk func(n planNode)
	walk = func(n planNode) {
		if n.IndexName != "" {
			conds[n.IndexName] = n.IndexCond
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	for _, n := range nodes {
		walk(n.Plan)
	}
	return conds
}

type planNode struct {
	IndexName string     `json:"Index Name"`
	IndexCond string     `json:"Index Cond"`
	Plans     []planNode `json:"Plans"`
}

type capturedQuery struct {
	sql  string
	vars []any
}

// recordQueries records every statement st reads, through Rows (trip pages and their existence
// probes run through the Row callbacks) as through Find and Take, and returns what it recorded
// so far.
func recordQueries(st *store.Store) func() []capturedQuery {
	var mu sync.Mutex
	var captured []capturedQuery
	record := func(db *gorm.DB) {
		mu.Lock()
		defer mu.Unlock()
		captured = append(captured, capturedQuery{sql: db.Statement.SQL.String(), vars: db.Statement.Vars})
	}
	Expect(st.TestDB().Callback().Row().After("gorm:row").Register("test:capture-rows", record)).To(Succeed())
	Expect(st.TestDB().Callback().Query().After("gorm:query").Register("test:capture-queries", record)).To(Succeed())
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
	return planOf(st, []string{"SET LOCAL enable_seqscan = " + seqscan}, "EXPLAIN (FORMAT JSON) "+q.sql, q.vars)
}

// planOf runs the setup statements, then explain with vars, then the cleanup statements, in a
// transaction it rolls back (settings and all), and returns explain's JSON plan, indented.
func planOf(st *store.Store, setup []string, explain string, vars []any, cleanup ...string) string {
	var plan string
	errDone := errors.New("rolled back")
	err := st.TestDB().Transaction(func(tx *gorm.DB) error {
		for _, stmt := range setup {
			if err := tx.Exec(stmt).Error; err != nil {
				return err
			}
		}
		var rows []string
		if err := tx.Raw(explain, vars...).Scan(&rows).Error; err != nil {
			return err
		}
		plan = strings.Join(rows, "\n")
		for _, stmt := range cleanup {
			if err := tx.Exec(stmt).Error; err != nil {
				return err
			}
		}
		return errDone
	})
	Expect(err).To(MatchError(errDone))
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

			captured := recordQueries(st)
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
