package store_test

import (
	"encoding/json"
	"fmt"
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
			var mu sync.Mutex
			var captured []capturedQuery
			// Trip pages are read with Rows (the Row callbacks), as are the existence probes.
			Expect(st.DB().Callback().Row().After("gorm:row").Register("test:capture", func(db *gorm.DB) {
				mu.Lock()
				defer mu.Unlock()
				captured = append(captured, capturedQuery{sql: db.Statement.SQL.String(), vars: db.Statement.Vars})
			})).To(Succeed())

			driver := createDriver(ctx, st, driverOpts{})
			rider := createRider(ctx, st)
			base := time.Now().UTC().Add(-time.Hour)
			var trips []store.Trip
			for i := range 60 {
				trips = append(trips, createTrip(ctx, st, tripOpts{DriverID: driver.ID, RiderID: rider.ID,
					CreatedAt: base.Add(time.Duration(i) * time.Second), Fare: int64(1000 + i)}))
			}
			Expect(st.DB().Exec("ANALYZE trips").Error).To(Succeed())

			filters := map[string]store.TripFilter{
				"no filter": {}, "status": {Status: store.TripStatusCompleted}, "city": {City: driver.City},
				"driver": {DriverID: driver.ID}, "rider": {RiderID: rider.ID},
				"city and time range": {City: driver.City, CreatedAfter: &base},
			}
			for name, filter := range filters {
				for _, field := range []store.SortField{store.SortCreatedAt, store.SortPickupTime, store.SortFare} {
					for _, desc := range []bool{true, false} {
						sort := []store.SortKey{{Field: field, Desc: desc}}
						mark := len(captured)
						after := trips[30].Keyset(sort)
						_, err := st.ListTrips(ctx, store.TripListParams{Filter: filter, Sort: sort, After: &after, Limit: 20})
						Expect(err).NotTo(HaveOccurred())
						page := captured[mark] // the page query; the existence probe follows it
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

type capturedQuery struct {
	sql  string
	vars []any
}

// explain returns PostgreSQL's JSON plan of q with sequential scans disabled.
func explain(st *store.Store, q capturedQuery) string {
	var plan string
	Expect(st.DB().Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("SET LOCAL enable_seqscan = off").Error; err != nil {
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
