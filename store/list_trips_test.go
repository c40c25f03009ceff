package store_test

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"gorm.io/gorm"

	"github.com/rideapi/ride/store"
)

// listFixture is a small world of trips with many ties on every sort value.
type listFixture struct {
	trips   []store.Trip
	cities  []string
	drivers []string
	riders  []string
}

var listBase = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// createListFixture makes 60 trips: groups of three share created_at (one microsecond apart
// between groups, so precision matters), fares take nine values, pickup times eleven offsets;
// three drivers in two cities, three riders, statuses of every kind.
func createListFixture(ctx context.Context, st *store.Store) listFixture {
	var f listFixture
	cityA, cityB := createCity(ctx, st, cityOpts{}).ID, createCity(ctx, st, cityOpts{}).ID
	f.cities = []string{cityA, cityB}
	for _, c := range []string{cityA, cityA, cityB} {
		f.drivers = append(f.drivers, createDriver(ctx, st, driverOpts{City: c}).ID)
	}
	for range 3 {
		f.riders = append(f.riders, createRider(ctx, st).ID)
	}
	for i := range 60 {
		status := store.TripStatusCompleted
		switch {
		case i == 0:
			status = store.TripStatusAccepted
		case i == 1:
			status = store.TripStatusInProgress
		case i == 2:
			status = store.TripStatusArriving
		case i%5 == 0:
			status = store.TripStatusCancelled
		}
		// The three active trips (i < 3) need three riders: a rider has one active trip at most.
		rider := f.riders[(i/2)%3]
		if i < 3 {
			rider = f.riders[i]
		}
		created := listBase.Add(time.Duration(i/3) * (time.Minute + time.Microsecond))
		f.trips = append(f.trips, createTrip(ctx, st, tripOpts{
			Status:     status,
			DriverID:   f.drivers[i%3],
			RiderID:    rider,
			CreatedAt:  created,
			PickupTime: created.Add(time.Duration((i*7)%11) * time.Minute),
			Fare:       1000 + int64((i*5)%9)*125,
		}))
	}
	return f
}

// sortValue is the value a sort key compares, computed here independently of the store.
func sortValue(t store.Trip, f store.SortField) int64 {
	switch f {
	case store.SortCreatedAt:
		return t.CreatedAt.UnixMicro()
	case store.SortPickupTime:
		return t.PickupTime.UnixMicro()
	case store.SortFare:
		return t.FareTotal
	}
	panic("unknown sort field " + string(f))
}

// expectedOrder sorts trips the way the contract says: the keys in order, then id (byte
// order) in the first key's direction.
func expectedOrder(trips []store.Trip, sort []store.SortKey) []store.Trip {
	out := slices.Clone(trips)
	slices.SortFunc(out, func(a, b store.Trip) int {
		for _, k := range sort {
			if c := cmp.Compare(sortValue(a, k.Field), sortValue(b, k.Field)); c != 0 {
				if k.Desc {
					return -c
				}
				return c
			}
		}
		c := strings.Compare(a.ID, b.ID)
		if sort[0].Desc {
			return -c
		}
		return c
	})
	return out
}

func matching(trips []store.Trip, keep func(store.Trip) bool) []store.Trip {
	var out []store.Trip
	for _, t := range trips {
		if keep(t) {
			out = append(out, t)
		}
	}
	return out
}

// parseSort reads the API's spelling ("-fare,created_at") into sort keys.
func parseSort(s string) []store.SortKey {
	var keys []store.SortKey
	for _, part := range strings.Split(s, ",") {
		desc := strings.HasPrefix(part, "-")
		keys = append(keys, store.SortKey{Field: store.SortField(strings.TrimPrefix(part, "-")), Desc: desc})
	}
	return keys
}

const pageSize = 7

var _ = Describe("ListTrips", func() {
	forEachEngine(func(e *testEngine) {
		var (
			st  *store.Store
			fix listFixture
		)
		BeforeEach(func(ctx SpecContext) {
			st = e.shared
			fix = createListFixture(ctx, st)
		})

		list := func(ctx context.Context, p store.TripListParams) store.TripPage {
			page, err := st.ListTrips(ctx, p)
			Expect(err).NotTo(HaveOccurred())
			return page
		}

		DescribeTable("walks every trip exactly once, in order, both ways",
			func(ctx SpecContext, sortSpec string, filter store.TripFilter, keep func(store.Trip) bool) {
				sort := parseSort(sortSpec)
				want := expectedOrder(matching(fix.trips, keep), sort)
				Expect(len(want)).To(BeNumerically(">", 2*pageSize), "the walk needs several pages")

				// Forward, page by page, as next_cursor would.
				var walked []store.Trip
				var pages []store.TripPage
				var after *store.Keyset
				for {
					page := list(ctx, store.TripListParams{Filter: filter, Sort: sort, After: after, Limit: pageSize})
					Expect(page.MoreBefore).To(Equal(len(walked) > 0), "MoreBefore at offset %d", len(walked))
					walked = append(walked, page.Trips...)
					Expect(page.MoreAfter).To(Equal(len(walked) < len(want)), "MoreAfter at offset %d", len(walked))
					pages = append(pages, page)
					if !page.MoreAfter {
						break
					}
					Expect(page.Trips).To(HaveLen(pageSize))
					ks := page.Trips[len(page.Trips)-1].Keyset(sort)
					after = &ks
				}
				Expect(tripIDs(walked)).To(Equal(tripIDs(want)))

				// Backward from the last page, as prev_cursor would: the same pages again.
				for i := len(pages) - 1; i > 0; i-- {
					ks := pages[i].Trips[0].Keyset(sort)
					page := list(ctx, store.TripListParams{Filter: filter, Sort: sort, Before: &ks, Limit: pageSize})
					Expect(tripIDs(page.Trips)).To(Equal(tripIDs(pages[i-1].Trips)))
					Expect(page.MoreAfter).To(BeTrue())
					Expect(page.MoreBefore).To(Equal(i-1 > 0))
				}

				// From every position, in both directions.
				for i, t := range want {
					ks := t.Keyset(sort)
					page := list(ctx, store.TripListParams{Filter: filter, Sort: sort, After: &ks, Limit: pageSize})
					end := min(i+1+pageSize, len(want))
					Expect(tripIDs(page.Trips)).To(Equal(tripIDs(want[i+1:end])), "after position %d", i)
					Expect(page.MoreAfter).To(Equal(end < len(want)), "after position %d", i)
					Expect(page.MoreBefore).To(BeTrue(), "after position %d", i)

					page = list(ctx, store.TripListParams{Filter: filter, Sort: sort, Before: &ks, Limit: pageSize})
					start := max(i-pageSize, 0)
					Expect(tripIDs(page.Trips)).To(Equal(tripIDs(want[start:i])), "before position %d", i)
					Expect(page.MoreBefore).To(Equal(start > 0), "before position %d", i)
					Expect(page.MoreAfter).To(BeTrue(), "before position %d", i)
				}
			},
			Entry("-created_at", "-created_at", store.TripFilter{}, func(store.Trip) bool { return true }),
			Entry("created_at", "created_at", store.TripFilter{}, func(store.Trip) bool { return true }),
			Entry("fare", "fare", store.TripFilter{}, func(store.Trip) bool { return true }),
			Entry("-fare,created_at (mixed directions)", "-fare,created_at", store.TripFilter{},
				func(store.Trip) bool { return true }),
			Entry("pickup_time", "pickup_time", store.TripFilter{}, func(store.Trip) bool { return true }),
			Entry("-pickup_time,-fare", "-pickup_time,-fare", store.TripFilter{}, func(store.Trip) bool { return true }),
			Entry("fare,-pickup_time,created_at", "fare,-pickup_time,created_at", store.TripFilter{},
				func(store.Trip) bool { return true }),
			Entry("-fare filtered by status", "-fare", store.TripFilter{Status: store.TripStatusCompleted},
				func(t store.Trip) bool { return t.Status == store.TripStatusCompleted }),
		)

		It("uses -created_at when no sort is given", func(ctx SpecContext) {
			page := list(ctx, store.TripListParams{Limit: 100})
			Expect(tripIDs(page.Trips)).To(Equal(tripIDs(expectedOrder(fix.trips, store.DefaultTripSort))))
			Expect(page.MoreAfter).To(BeFalse())
			Expect(page.MoreBefore).To(BeFalse())
		})

		It("accepts positions that name no trip", func(ctx SpecContext) {
			sort := parseSort("created_at")
			want := expectedOrder(fix.trips, sort)

			beforeAll := store.Keyset{Values: []int64{listBase.Add(-time.Hour).UnixMicro()}, ID: ""}
			page := list(ctx, store.TripListParams{Sort: sort, After: &beforeAll, Limit: pageSize})
			Expect(tripIDs(page.Trips)).To(Equal(tripIDs(want[:pageSize])))
			Expect(page.MoreBefore).To(BeFalse())
			Expect(page.MoreAfter).To(BeTrue())

			pastAll := store.Keyset{Values: []int64{time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()}, ID: "~"}
			page = list(ctx, store.TripListParams{Sort: sort, Before: &pastAll, Limit: pageSize})
			Expect(tripIDs(page.Trips)).To(Equal(tripIDs(want[len(want)-pageSize:])))
			Expect(page.MoreAfter).To(BeFalse())
			Expect(page.MoreBefore).To(BeTrue())

			page = list(ctx, store.TripListParams{Sort: sort, After: &pastAll, Limit: pageSize})
			Expect(page.Trips).To(BeEmpty())
			Expect(page.MoreAfter).To(BeFalse())
			Expect(page.MoreBefore).To(BeTrue())
		})

		It("says nothing is either way of an empty list", func(ctx SpecContext) {
			empty := store.TripFilter{City: "atlantis"}
			page := list(ctx, store.TripListParams{Filter: empty, Limit: pageSize})
			Expect(page.Trips).To(BeEmpty())
			Expect(page.MoreAfter).To(BeFalse())
			Expect(page.MoreBefore).To(BeFalse())

			ks := fix.trips[10].Keyset(nil)
			page = list(ctx, store.TripListParams{Filter: empty, After: &ks, Limit: pageSize})
			Expect(page.Trips).To(BeEmpty())
			Expect(page.MoreAfter).To(BeFalse())
			Expect(page.MoreBefore).To(BeFalse())
		})

		It("neither skips nor repeats when trips are added and removed mid-walk", func(ctx SpecContext) {
			sort := store.DefaultTripSort
			want := expectedOrder(fix.trips, sort)
			first := list(ctx, store.TripListParams{Sort: sort, Limit: pageSize})
			Expect(tripIDs(first.Trips)).To(Equal(tripIDs(want[:pageSize])))

			// A newer trip lands before the cursor; a trip already seen goes away.
			createTrip(ctx, st, tripOpts{CreatedAt: listBase.Add(24 * time.Hour), DriverID: fix.drivers[0]})
			Expect(st.TestDB().WithContext(ctx).Delete(&store.Trip{}, "id = ?", want[0].ID).Error).To(Succeed())

			walked := slices.Clone(first.Trips)
			page := first
			for page.MoreAfter {
				ks := page.Trips[len(page.Trips)-1].Keyset(sort)
				page = list(ctx, store.TripListParams{Sort: sort, After: &ks, Limit: pageSize})
				walked = append(walked, page.Trips...)
			}
			Expect(tripIDs(walked)).To(Equal(tripIDs(want)))
		})

		It("loads each trip's driver", func(ctx SpecContext) {
			page := list(ctx, store.TripListParams{Limit: 100})
			for _, t := range page.Trips {
				Expect(t.Driver.ID).To(Equal(t.DriverID))
				Expect(t.Driver.Name).To(Equal("Test Driver"))
			}
		})

		It("costs at most two queries per page", func(ctx SpecContext) {
			var queries atomic.Int64
			counted := st.TestDB().Session(&gorm.Session{NewDB: true})
			count := func(*gorm.DB) { queries.Add(1) }
			Expect(counted.Callback().Query().After("gorm:query").Register("test:count_query", count)).To(Succeed())
			Expect(counted.Callback().Row().After("gorm:row").Register("test:count_row", count)).To(Succeed())
			DeferCleanup(func() {
				_ = counted.Callback().Query().Remove("test:count_query")
				_ = counted.Callback().Row().Remove("test:count_row")
			})

			first := list(ctx, store.TripListParams{Limit: pageSize})
			Expect(queries.Load()).To(BeEquivalentTo(1))
			queries.Store(0)
			ks := first.Trips[pageSize-1].Keyset(nil)
			list(ctx, store.TripListParams{After: &ks, Limit: 50})
			Expect(queries.Load()).To(BeEquivalentTo(2))
		})

		Describe("filters", func() {
			at := func(i int) time.Time { return fix.trips[i].CreatedAt }
			ptr := func(t time.Time) *time.Time { return &t }

			DescribeTable("select exactly the matching trips",
				func(ctx SpecContext, filter func() store.TripFilter, keep func(store.Trip) bool) {
					want := expectedOrder(matching(fix.trips, keep), store.DefaultTripSort)
					Expect(want).NotTo(BeEmpty())
					Expect(len(want)).To(BeNumerically("<", len(fix.trips)))
					page := list(ctx, store.TripListParams{Filter: filter(), Limit: 100})
					Expect(tripIDs(page.Trips)).To(Equal(tripIDs(want)))
				},
				Entry("status", func() store.TripFilter { return store.TripFilter{Status: store.TripStatusCancelled} },
					func(t store.Trip) bool { return t.Status == store.TripStatusCancelled }),
				Entry("city", func() store.TripFilter { return store.TripFilter{City: fix.cities[1]} },
					func(t store.Trip) bool { return t.City == fix.cities[1] }),
				Entry("driver", func() store.TripFilter { return store.TripFilter{DriverID: fix.drivers[1]} },
					func(t store.Trip) bool { return t.DriverID == fix.drivers[1] }),
				Entry("rider", func() store.TripFilter { return store.TripFilter{RiderID: fix.riders[2]} },
					func(t store.Trip) bool { return t.RiderID == fix.riders[2] }),
				Entry("created after (exclusive)", func() store.TripFilter { return store.TripFilter{CreatedAfter: ptr(at(30))} },
					func(t store.Trip) bool { return t.CreatedAt.After(at(30)) }),
				Entry("created before (exclusive)", func() store.TripFilter { return store.TripFilter{CreatedBefore: ptr(at(30))} },
					func(t store.Trip) bool { return t.CreatedAt.Before(at(30)) }),
				Entry("created after a sub-microsecond bound",
					func() store.TripFilter {
						return store.TripFilter{CreatedAfter: ptr(at(30).Add(-500 * time.Nanosecond))}
					},
					func(t store.Trip) bool { return !t.CreatedAt.Before(at(30)) }),
				Entry("created before a sub-microsecond bound",
					func() store.TripFilter {
						return store.TripFilter{CreatedBefore: ptr(at(30).Add(500 * time.Nanosecond))}
					},
					func(t store.Trip) bool { return !t.CreatedAt.After(at(30)) }),
				Entry("created between, in another time zone", func() store.TripFilter {
					zone := time.FixedZone("UTC-7", -7*3600)
					return store.TripFilter{CreatedAfter: ptr(at(10).In(zone)), CreatedBefore: ptr(at(40).In(zone))}
				}, func(t store.Trip) bool { return t.CreatedAt.After(at(10)) && t.CreatedAt.Before(at(40)) }),
				Entry("pickup time after (exclusive)",
					func() store.TripFilter { return store.TripFilter{PickupTimeAfter: ptr(fix.trips[25].PickupTime)} },
					func(t store.Trip) bool { return t.PickupTime.After(fix.trips[25].PickupTime) }),
				Entry("several at once", func() store.TripFilter {
					return store.TripFilter{Status: store.TripStatusCompleted, City: fix.cities[0], RiderID: fix.riders[0]}
				}, func(t store.Trip) bool {
					return t.Status == store.TripStatusCompleted && t.City == fix.cities[0] && t.RiderID == fix.riders[0]
				}),
			)
		})

		It("refuses parameters it cannot run", func(ctx SpecContext) {
			ks := fix.trips[0].Keyset(nil)
			for _, p := range []store.TripListParams{
				{Limit: 0},
				{Limit: 5, After: &ks, Before: &ks},
				{Limit: 5, Sort: []store.SortKey{{Field: "distance"}}},
				{Limit: 5, Sort: parseSort("fare,-fare")},
				{Limit: 5, Sort: parseSort("fare,created_at"), After: &ks},
			} {
				_, err := st.ListTrips(ctx, p)
				Expect(err).To(MatchError(store.ErrInvalidListParams), "%+v", p)
			}
		})
	})
})
