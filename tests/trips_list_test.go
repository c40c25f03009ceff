package tests

import (
	"context"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/store/storetest"
)

// walk follows next_cursor from the first page to the end and returns every trip id in order.
func walk(h *Harness, key, query string) []string {
	GinkgoHelper()
	var ids []string
	cursor := ""
	for pages := 0; ; pages++ {
		Expect(pages).To(BeNumerically("<", 1000), "walk does not end")
		path := "/v1/trips?" + query
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		res := h.GET(path, key)
		Expect(res.Status).To(Equal(200), "%s", res.Body)
		var page gen.TripList
		res.Decode(&page)
		Expect(page.Pagination.Count).To(BeEquivalentTo(len(page.Data)))
		for _, t := range page.Data {
			ids = append(ids, t.Id)
		}
		if page.Pagination.NextCursor == nil {
			Expect(page.Pagination.HasMore).To(BeFalse())
			return ids
		}
		Expect(page.Pagination.HasMore).To(BeTrue())
		cursor = *page.Pagination.NextCursor
	}
}

func page(h *Harness, key, path string) gen.TripList {
	GinkgoHelper()
	res := h.GET(path, key)
	Expect(res.Status).To(Equal(200), "%s", res.Body)
	var p gen.TripList
	res.Decode(&p)
	return p
}

func tripIDs(trips []store.Trip) []string {
	ids := make([]string, len(trips))
	for i, t := range trips {
		ids[i] = t.ID
	}
	return ids
}

var _ = ForEachEngine("Listing trips", func(h *Harness) {
	var (
		driver store.Driver
		rider  store.Rider
		trips  []store.Trip
		base   time.Time
	)

	// 40 trips in a city of their own, with deliberate ties on created_at and fare.
	BeforeEach(func() {
		driver = h.NewDriver(DriverOpts{})
		rider = h.NewRider()
		base = time.Now().UTC().Add(-48 * time.Hour).Truncate(time.Microsecond)
		trips = nil
		for i := range 40 {
			trips = append(trips, h.NewTrip(TripOpts{
				Driver: driver, Rider: rider,
				CreatedAt:  base.Add(time.Duration(i/3) * time.Minute), // three trips per instant
				PickupTime: base.Add(time.Duration(40-i) * time.Minute),
				Fare:       int64(1000 + (i%5)*100), // five distinct fares
				Status:     []string{"completed", "cancelled", "completed"}[i%3],
			}))
		}
	})

	// byCity scopes a query to this spec's trips, 7 a page unless extra sets a limit.
	byCity := func(extra string) string {
		if strings.Contains(extra, "limit=") {
			return "city=" + driver.City + extra
		}
		return "city=" + driver.City + "&limit=7" + extra
	}

	It("walks every trip exactly once, newest first, ties broken by id", func() {
		expected := slices.Clone(trips)
		sort.Slice(expected, func(i, j int) bool {
			if !expected[i].CreatedAt.Equal(expected[j].CreatedAt) {
				return expected[i].CreatedAt.After(expected[j].CreatedAt)
			}
			return expected[i].ID > expected[j].ID
		})
		Expect(walk(h, h.Admin, byCity(""))).To(Equal(tripIDs(expected)))
	})

	DescribeTable("orders by any sort it offers",
		func(sortParam string, less func(a, b store.Trip) bool) {
			expected := slices.Clone(trips)
			sort.Slice(expected, func(i, j int) bool { return less(expected[i], expected[j]) })
			Expect(walk(h, h.Admin, byCity("&sort="+sortParam))).To(Equal(tripIDs(expected)))
		},
		Entry("fare ascending", "fare", func(a, b store.Trip) bool {
			if a.FareTotal != b.FareTotal {
				return a.FareTotal < b.FareTotal
			}
			return a.ID < b.ID
		}),
		Entry("created_at ascending", "created_at", func(a, b store.Trip) bool {
			if !a.CreatedAt.Equal(b.CreatedAt) {
				return a.CreatedAt.Before(b.CreatedAt)
			}
			return a.ID < b.ID
		}),
		Entry("pickup_time descending", "-pickup_time", func(a, b store.Trip) bool {
			if !a.PickupTime.Equal(b.PickupTime) {
				return a.PickupTime.After(b.PickupTime)
			}
			return a.ID > b.ID
		}),
		Entry("mixed: fare descending, then created_at ascending", "-fare,created_at", func(a, b store.Trip) bool {
			if a.FareTotal != b.FareTotal {
				return a.FareTotal > b.FareTotal
			}
			if !a.CreatedAt.Equal(b.CreatedAt) {
				return a.CreatedAt.Before(b.CreatedAt)
			}
			return a.ID > b.ID // id follows the first key's direction
		}),
	)

	It("goes back with prev_cursor through the same pages", func() {
		var forward [][]string
		var last gen.TripList
		path := "/v1/trips?" + byCity("&sort=-fare,created_at")
		for p := page(h, h.Admin, path); ; {
			Expect(p.Pagination.PrevCursor == nil).To(Equal(len(forward) == 0), "prev_cursor is null exactly at the start")
			var ids []string
			for _, t := range p.Data {
				ids = append(ids, t.Id)
			}
			forward = append(forward, ids)
			last = p
			if p.Pagination.NextCursor == nil {
				break
			}
			p = page(h, h.Admin, path+"&cursor="+url.QueryEscape(*p.Pagination.NextCursor))
		}
		Expect(len(forward)).To(Equal(6)) // 40 trips, 7 a page

		p := last
		for i := len(forward) - 2; i >= 0; i-- {
			Expect(p.Pagination.PrevCursor).NotTo(BeNil())
			p = page(h, h.Admin, path+"&cursor="+url.QueryEscape(*p.Pagination.PrevCursor))
			var ids []string
			for _, t := range p.Data {
				ids = append(ids, t.Id)
			}
			Expect(ids).To(Equal(forward[i]), "page %d going back", i)
			Expect(p.Pagination.HasMore).To(BeTrue(), "has_more speaks of the forward direction")
		}
		Expect(p.Pagination.PrevCursor).To(BeNil())
	})

	It("neither skips nor repeats a trip while others are inserted and deleted", func() {
		doomed := map[string]bool{}
		var doomedIDs []string
		for i := range 12 {
			t := h.NewTrip(TripOpts{Driver: driver, Rider: rider, CreatedAt: base.Add(time.Duration(i)*time.Minute + time.Second)})
			doomed[t.ID] = true
			doomedIDs = append(doomedIDs, t.ID)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		inserted := map[string]bool{}
		var mu sync.Mutex
		driver, rider := driver, rider // the writer must not follow the next spec's variables
		wg.Add(1)
		DeferCleanup(func() { // stops the writer even when the walk fails
			select {
			case <-stop:
			default:
				close(stop)
			}
			wg.Wait()
		})
		go func() {
			defer GinkgoRecover()
			defer wg.Done()
			for i := 0; i < 60; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// Newer than the walk position, older than it, and deletions of others.
				at := base.Add(time.Duration(i%20) * time.Minute).Add(time.Duration(i) * time.Millisecond)
				t := h.NewTrip(TripOpts{Driver: driver, Rider: rider, CreatedAt: at})
				mu.Lock()
				inserted[t.ID] = true
				mu.Unlock()
				if i < len(doomedIDs) {
					Expect(storetest.DeleteTrip(context.Background(), h.Store, doomedIDs[i])).To(Succeed())
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
		seen := walk(h, h.Admin, byCity("&limit=5"))
		close(stop)
		wg.Wait()

		counts := map[string]int{}
		for _, id := range seen {
			counts[id]++
			Expect(counts[id]).To(Equal(1), "trip %s repeated", id)
		}
		for _, t := range trips {
			Expect(counts).To(HaveKey(t.ID), "pre-existing trip %s skipped", t.ID)
		}
		mu.Lock()
		defer mu.Unlock()
		for id := range counts {
			Expect(doomed[id] || inserted[id] || slices.Contains(tripIDs(trips), id)).To(BeTrue())
		}
	})

	It("filters by status, time ranges (exclusive) and driver", func() {
		all := func(q string) []string { return walk(h, h.Admin, byCity(q)) }
		count := func(pred func(t store.Trip) bool) int {
			n := 0
			for _, t := range trips {
				if pred(t) {
					n++
				}
			}
			return n
		}
		Expect(all("&status=cancelled")).To(HaveLen(count(func(t store.Trip) bool { return t.Status == "cancelled" })))
		cut := trips[9].CreatedAt // shared by trips 9, 10, 11
		Expect(all("&created_after=" + url.QueryEscape(cut.Format(time.RFC3339Nano)))).
			To(HaveLen(count(func(t store.Trip) bool { return t.CreatedAt.After(cut) })))
		Expect(all("&created_before=" + url.QueryEscape(cut.Format(time.RFC3339Nano)))).
			To(HaveLen(count(func(t store.Trip) bool { return t.CreatedAt.Before(cut) })))
		pick := trips[20].PickupTime
		Expect(all("&pickup_time_after=" + url.QueryEscape(pick.Format(time.RFC3339Nano)))).
			To(HaveLen(count(func(t store.Trip) bool { return t.PickupTime.After(pick) })))
		Expect(all("&driver_id=" + driver.ID)).To(HaveLen(40))
		Expect(all("&driver_id=drv_nosuchdriver")).To(BeEmpty())
		Expect(walk(h, h.Admin, "city=no-such-city")).To(BeEmpty())
	})

	It("shows riders and drivers only their own trips", func() {
		other := h.NewRider()
		mine := h.NewTrip(TripOpts{Driver: driver, Rider: other})
		riderKey := h.Key(auth.RoleRider, other.ID)
		Expect(walk(h, riderKey, "limit=100")).To(Equal([]string{mine.ID}))

		otherDriver := h.NewDriver(DriverOpts{City: driver.City})
		theirs := h.NewTrip(TripOpts{Driver: otherDriver, Rider: rider})
		driverKey := h.Key(auth.RoleDriver, otherDriver.ID)
		Expect(walk(h, driverKey, "limit=100")).To(Equal([]string{theirs.ID}))
		Expect(walk(h, driverKey, "driver_id="+driver.ID)).To(BeEmpty(), "a driver cannot list another driver's trips")
	})

	It("returns only the requested members with fields", func() {
		res := h.GET("/v1/trips?"+byCity("&fields=fare,pickup"), h.Admin)
		Expect(res.Status).To(Equal(200))
		for _, item := range res.JSON()["data"].([]any) {
			Expect(item).To(HaveLen(4))
			Expect(item).To(HaveKey("id"))
			Expect(item).To(HaveKey("status"))
			Expect(item).To(HaveKey("fare"))
			Expect(item).To(HaveKey("pickup"))
		}
	})

	It("lists a driver's trips for that driver and admin only", func() {
		path := "/v1/drivers/" + driver.ID + "/trips?limit=100"
		Expect(page(h, h.Admin, path).Data).To(HaveLen(40))
		Expect(page(h, h.Key(auth.RoleDriver, driver.ID), path).Data).To(HaveLen(40))
		Expect(h.GET(path, h.Key(auth.RoleRider, rider.ID)).Problem().Code).To(Equal("forbidden"))
		Expect(h.GET("/v1/drivers/"+h.NewDriver(DriverOpts{}).ID+"/trips", h.Key(auth.RoleDriver, driver.ID)).Status).To(Equal(403))
		Expect(h.GET("/v1/drivers/drv_aaaaaaaaaaaaaaaaaaaaaaaaaa/trips", h.Admin).Status).To(Equal(404))
	})

	Describe("rejects bad list input with 400 and a precise code", func() {
		DescribeTable("limit",
			func(limit string) {
				res := h.GET("/v1/trips?limit="+limit, h.Admin)
				Expect(res.Status).To(Equal(400))
				p := res.Problem()
				Expect(p.Code).To(Equal("invalid_limit"))
				Expect((*p.Errors)[0].Location).To(Equal("query.limit"))
			},
			Entry("zero", "0"), Entry("above the maximum", "101"), Entry("not a number", "abc"), Entry("negative", "-1"),
		)

		It("refuses a tampered cursor", func() {
			p := page(h, h.Admin, "/v1/trips?"+byCity(""))
			cursor := []byte(*p.Pagination.NextCursor)
			cursor[len(cursor)/2] ^= 1
			res := h.GET("/v1/trips?"+byCity("&cursor="+url.QueryEscape(string(cursor))), h.Admin)
			Expect(res.Status).To(Equal(400))
			Expect(res.Problem().Code).To(Equal("invalid_cursor"))
			res = h.GET("/v1/trips?cursor=not-a-cursor!!", h.Admin)
			Expect(res.Problem().Code).To(Equal("invalid_cursor"))
		})

		DescribeTable("refuses a cursor reused with another query",
			func(other func() (string, string)) {
				p := page(h, h.Admin, "/v1/trips?"+byCity(""))
				cursor := url.QueryEscape(*p.Pagination.NextCursor)
				query, key := other()
				res := h.GET("/v1/trips?"+query+"&cursor="+cursor, key)
				Expect(res.Status).To(Equal(400))
				Expect(res.Problem().Code).To(Equal("invalid_cursor"))
			},
			Entry("another filter", func() (string, string) { return byCity("&status=completed"), h.Admin }),
			Entry("another sort", func() (string, string) { return byCity("&sort=fare"), h.Admin }),
			Entry("another caller", func() (string, string) { return byCity(""), h.KeyIn(auth.RoleAdmin, "", "acct_other") }),
		)

		It("refuses a trips cursor on a driver's trips", func() {
			p := page(h, h.Admin, "/v1/trips?"+byCity(""))
			res := h.GET("/v1/drivers/"+driver.ID+"/trips?"+byCity("&cursor="+url.QueryEscape(*p.Pagination.NextCursor)), h.Admin)
			Expect(res.Problem().Code).To(Equal("invalid_cursor"))
		})

		DescribeTable("other parameters",
			func(query, location string) {
				res := h.GET("/v1/trips?"+query, h.Admin)
				Expect(res.Status).To(Equal(400), "%s", res.Body)
				p := res.Problem()
				Expect(p.Code).To(Equal("invalid_request"))
				Expect(p.Errors).NotTo(BeNil())
				var locations []string
				for _, e := range *p.Errors {
					locations = append(locations, e.Location)
				}
				Expect(locations).To(ContainElement(location))
			},
			Entry("unknown sort field", "sort=name", "query.sort"),
			Entry("sort key twice", "sort=fare,-fare", "query.sort"),
			Entry("unknown field", "fields=id,secret", "query.fields"),
			Entry("empty fields", "fields=", "query.fields"),
			Entry("unknown status", "status=lost", "query.status"),
			Entry("not a date-time", "created_after=yesterday", "query.created_after"),
			Entry("a date without time", "created_before=2026-01-01", "query.created_before"),
			Entry("unknown parameter", "colour=red", "query.colour"),
		)
	})

	It("answers 401 without a key and with an unknown one", func() {
		res := h.GET("/v1/trips", "")
		Expect(res.Status).To(Equal(401))
		Expect(res.Header.Get("WWW-Authenticate")).To(HavePrefix("Bearer"))
		Expect(res.Problem().Code).To(Equal("unauthenticated"))
		Expect(h.GET("/v1/trips", "rk_unknown").Status).To(Equal(401))
		Expect(h.GET("/v1/drivers/"+driver.ID+"/trips", "").Status).To(Equal(401))
	})

	It("reports has_more exactly, sparing an empty extra fetch", func() {
		p := page(h, h.Admin, "/v1/trips?"+byCity("&limit=39"))
		Expect(p.Data).To(HaveLen(39))
		Expect(p.Pagination.HasMore).To(BeTrue())
		p = page(h, h.Admin, "/v1/trips?"+byCity("&limit=39&cursor="+url.QueryEscape(*p.Pagination.NextCursor)))
		Expect(p.Data).To(HaveLen(1))
		Expect(p.Pagination.HasMore).To(BeFalse())
		Expect(p.Pagination.NextCursor).To(BeNil())
	})
})
