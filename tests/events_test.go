package tests

import (
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// eventsEpoch and eventWindows place each events spec's window (see below).
var (
	eventsEpoch  = time.Now().UTC()
	eventWindows atomic.Int64
)

var _ = ForEachEngine("Events", func(h *Harness) {
	// Each spec writes its events into a one-minute window of its own, a day before the suite
	// began: inside the retention, before every endpoint (so nothing is delivered), apart from
	// other specs' events (the windows are two minutes apart, never drawn at random).
	var base time.Time
	var window string
	BeforeEach(func() {
		slot := time.Duration(eventWindows.Add(1))
		base = eventsEpoch.Add(-24*time.Hour - slot*2*time.Minute).Truncate(time.Second)
		window = "created_after=" + url.QueryEscape(base.Add(-time.Microsecond).Format(time.RFC3339Nano)) +
			"&created_before=" + url.QueryEscape(base.Add(time.Minute).Format(time.RFC3339Nano))
	})

	ids := func(res *Response) []string {
		GinkgoHelper()
		Expect(res.Status).To(Equal(http.StatusOK), "%s", res.Body)
		var out []string
		for _, item := range res.JSON()["data"].([]any) {
			out = append(out, item.(map[string]any)["id"].(string))
		}
		return out
	}

	It("lists events newest first, filtered by kind and by an exclusive time window", func() {
		var all []store.Event
		for i, kind := range []string{"trip.created", "trip.completed", "payment.succeeded", "trip.completed", "payment.failed"} {
			all = append(all, h.AppendEventAt(kind, base.Add(time.Duration(i)*time.Second)))
		}
		newestFirst := func(events ...store.Event) []string {
			var out []string
			for i := len(events) - 1; i >= 0; i-- {
				out = append(out, events[i].ID)
			}
			return out
		}
		Expect(ids(h.GET("/v1/events?"+window, h.Admin))).To(Equal(newestFirst(all...)))
		Expect(ids(h.GET("/v1/events?type=trip.completed&"+window, h.Admin))).To(Equal(newestFirst(all[1], all[3])))

		// Exclusive bounds: the events exactly at the bounds are left out.
		after := url.QueryEscape(all[1].CreatedAt.Format(time.RFC3339Nano))
		before := url.QueryEscape(all[3].CreatedAt.Format(time.RFC3339Nano))
		Expect(ids(h.GET("/v1/events?created_after="+after+"&created_before="+before, h.Admin))).To(Equal([]string{all[2].ID}))

		// Each item is the event as delivered, valid against the Event schema.
		res := h.GET("/v1/events?type=payment.failed&"+window, h.Admin)
		item := res.JSON()["data"].([]any)[0].(map[string]any)
		Expect(item).To(HaveKeyWithValue("type", "payment.failed"))
		Expect(item["data"]).To(HaveKeyWithValue("failure_code", "card_declined"))
		Expect(item).To(HaveKeyWithValue("created_at", all[4].CreatedAt.Format(time.RFC3339Nano)))
	})

	It("pages with cursors bound to the filters, both ways", func() {
		var want []string
		for i := range 5 {
			e := h.AppendEventAt("trip.arriving", base.Add(time.Duration(i)*time.Millisecond))
			want = append([]string{e.ID}, want...)
		}
		// Two events at the same instant: the id breaks the tie.
		twins := []store.Event{h.AppendEventAt("trip.arriving", base.Add(10*time.Second)), h.AppendEventAt("trip.arriving", base.Add(10*time.Second))}
		if twins[0].ID < twins[1].ID {
			twins[0], twins[1] = twins[1], twins[0]
		}
		want = append([]string{twins[0].ID, twins[1].ID}, want...)

		var seen []string
		var cursors []string
		path := "/v1/events?limit=3&" + window
		for {
			res := h.GET(path, h.Admin)
			seen = append(seen, ids(res)...)
			next := res.JSON()["pagination"].(map[string]any)["next_cursor"]
			if next == nil {
				break
			}
			cursors = append(cursors, next.(string))
			path = "/v1/events?limit=3&" + window + "&cursor=" + next.(string)
		}
		Expect(seen).To(Equal(want))

		second := h.GET("/v1/events?limit=3&"+window+"&cursor="+cursors[0], h.Admin).JSON()
		prev := second["pagination"].(map[string]any)["prev_cursor"].(string)
		Expect(ids(h.GET("/v1/events?limit=3&"+window+"&cursor="+prev, h.Admin))).To(Equal(want[:3]))

		// The cursor belongs to its filters: another type or window is a new walk.
		res := h.GET("/v1/events?limit=3&type=trip.arriving&"+window+"&cursor="+cursors[0], h.Admin)
		Expect(res.Status).To(Equal(http.StatusBadRequest))
		Expect(res.Problem().Code).To(Equal("invalid_cursor"))
		res = h.GET("/v1/events?limit=3&cursor="+cursors[0], h.Admin)
		Expect(res.Problem().Code).To(Equal("invalid_cursor"))
	})

	It("narrows to one trip's events, trip and payment kinds, with cursors bound to the trip", func() {
		city := h.NewCity(CityOpts{})
		h.NewDriver(DriverOpts{City: city.ID})
		h.NewDriver(DriverOpts{City: city.ID})
		var trips []string
		for range 2 {
			rider := h.NewRider()
			key := h.Key(auth.RoleRider, rider.ID)
			trips = append(trips, h.BookTrip(key, h.NewEstimate(key, city).EstimateId).Id)
		}
		driverKey := h.Key(auth.RoleDriver, h.GET("/v1/trips/"+trips[0], h.Admin).JSON()["driver_summary"].(map[string]any)["id"].(string))
		Expect(h.PutStatus(driverKey, trips[0], "arriving", nil).Status).To(Equal(http.StatusOK))

		kinds := func(path string) []string {
			var out []string
			for _, item := range h.GET(path, h.Admin).JSON()["data"].([]any) {
				e := item.(map[string]any)
				Expect(e["data"]).To(HaveKeyWithValue("trip_id", trips[0]))
				out = append(out, e["type"].(string))
			}
			return out
		}
		Expect(kinds("/v1/events?trip_id=" + trips[0])).To(Equal([]string{"trip.arriving", "trip.created"}))
		Expect(kinds("/v1/events?type=trip.created&trip_id=" + trips[0])).To(Equal([]string{"trip.created"}))

		page := h.GET("/v1/events?limit=1&trip_id="+trips[0], h.Admin).JSON()
		cursor := page["pagination"].(map[string]any)["next_cursor"].(string)
		Expect(ids(h.GET("/v1/events?limit=1&trip_id="+trips[0]+"&cursor="+url.QueryEscape(cursor), h.Admin))).To(HaveLen(1))
		ExpectProblem(h.GET("/v1/events?limit=1&trip_id="+trips[1]+"&cursor="+url.QueryEscape(cursor), h.Admin),
			http.StatusBadRequest, "invalid_cursor")
		Expect(ids(h.GET("/v1/events?trip_id=trp_nosuchtrip0000000000000000", h.Admin))).To(BeEmpty())
	})

	It("reads one event, and answers 404 for unknown ids", func() {
		e := h.AppendEventAt("trip.started", base)
		res := h.GET("/v1/events/"+e.ID, h.Admin)
		Expect(res.Status).To(Equal(http.StatusOK))
		Expect(res.JSON()).To(HaveKeyWithValue("id", e.ID))
		Expect(res.JSON()["data"]).To(HaveKeyWithValue("status", "in_progress"))
		Expect(res.Header.Get("ETag")).NotTo(BeEmpty())
		for _, id := range []string{ride.NewID(ride.PrefixEvent), "evt_short", ride.NewID(ride.PrefixTrip)} {
			Expect(h.GET("/v1/events/"+id, h.Admin).Status).To(Equal(http.StatusNotFound), id)
		}
	})

	DescribeTable("refuses bad filters with 400",
		func(query, location string) {
			res := h.GET("/v1/events?"+query, h.Admin)
			Expect(res.Status).To(Equal(http.StatusBadRequest))
			Expect(*res.Problem().Errors).To(ContainElement(HaveField("Location", location)))
		},
		Entry("unknown kind", "type=trip.teleported", "query.type"),
		Entry("not a date-time", "created_after=yesterday", "query.created_after"),
		Entry("a limit too large", "limit=101", "query.limit"),
		Entry("an unknown parameter", "kind=trip.created", "query.kind"),
	)

	It("is for admins only", func() {
		rider := h.Key(auth.RoleRider, h.NewRider().ID)
		Expect(h.GET("/v1/events", rider).Status).To(Equal(http.StatusForbidden))
		Expect(h.GET("/v1/events", "").Status).To(Equal(http.StatusUnauthorized))
	})

	It("forgets events after 30 days", func(ctx SpecContext) {
		old := h.AppendEventAt("trip.created", time.Now().Add(-31*24*time.Hour))
		fresh := h.AppendEventAt("trip.created", base)
		// The worker purges hourly; run the same purge now rather than wait.
		_, err := h.Store.PurgeEvents(ctx, time.Now().Add(-30*24*time.Hour))
		Expect(err).NotTo(HaveOccurred())
		Expect(h.GET("/v1/events/"+old.ID, h.Admin).Status).To(Equal(http.StatusNotFound))
		Expect(h.GET("/v1/events/"+fresh.ID, h.Admin).Status).To(Equal(http.StatusOK))
	})
})
