package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/store"
)

// The lifecycle of the contract, written out here rather than taken from the code under test.
var (
	tripStatuses = []string{"accepted", "arriving", "in_progress", "completed", "cancelled"}
	legalMoves   = map[[2]string]string{ // (from, to) → the event it writes
		{"accepted", "arriving"}:     "trip.arriving",
		{"accepted", "in_progress"}:  "trip.started",
		{"accepted", "cancelled"}:    "trip.cancelled",
		{"arriving", "in_progress"}:  "trip.started",
		{"arriving", "cancelled"}:    "trip.cancelled",
		{"in_progress", "completed"}: "trip.completed",
	}
	activeStatus = map[string]bool{"accepted": true, "arriving": true, "in_progress": true}
)

func transitionEntries() []TableEntry {
	var entries []TableEntry
	for _, from := range tripStatuses {
		for _, to := range tripStatuses {
			outcome := "409 invalid_transition"
			if from == to {
				outcome = "200 no-op"
			} else if event, ok := legalMoves[[2]string{from, to}]; ok {
				outcome = "200 + " + event
			}
			entries = append(entries, Entry(fmt.Sprintf("%s → %s: %s", from, to, outcome), from, to))
		}
	}
	return entries
}

var _ = ForEachEngine("The trip lifecycle", func(h *Harness) {
	// newTrip makes a trip in status with a driver and a rider of its own (the database allows
	// one active trip each), the driver unavailable while the trip is active.
	newTrip := func(status string) (store.Trip, string, string) {
		driver := h.NewDriver(DriverOpts{Unavailable: activeStatus[status]})
		rider := h.NewRider()
		trip := h.NewTrip(TripOpts{Driver: driver, Rider: rider, Status: status, CreatedAt: time.Now().Add(-time.Hour)})
		return trip, h.Key(auth.RoleDriver, driver.ID), h.Key(auth.RoleRider, rider.ID)
	}

	DescribeTable("PUT /v1/trips/{tripId} over every (from, to) pair",
		func(ctx SpecContext, from, to string) {
			trip, driverKey, _ := newTrip(from)
			before := time.Now()
			res := h.PutStatus(driverKey, trip.ID, to, nil)
			stored, err := h.Store.TripByID(ctx, trip.ID)
			Expect(err).NotTo(HaveOccurred())
			events, err := h.Store.EventsBySubject(ctx, trip.ID)
			Expect(err).NotTo(HaveOccurred())

			event, legal := legalMoves[[2]string{from, to}]
			switch {
			case from == to:
				Expect(res.Status).To(Equal(http.StatusOK), "%s", res.Body)
				Expect(events).To(BeEmpty(), "a no-op writes no event")
				Expect(stored.UpdatedAt).To(Equal(trip.UpdatedAt.UTC().Truncate(time.Microsecond)), "a no-op changes nothing")
			case !legal:
				ExpectProblem(res, http.StatusConflict, "invalid_transition")
				Expect(events).To(BeEmpty())
				Expect(stored.Status).To(Equal(from))
				return
			default:
				Expect(res.Status).To(Equal(http.StatusOK), "%s", res.Body)
				Expect(events).To(HaveLen(1))
				Expect(events[0].Type).To(Equal(event))
				Expect(stored.UpdatedAt).To(BeTemporally(">=", before.Truncate(time.Microsecond)))
			}

			var view gen.Trip
			res.Decode(&view)
			Expect(string(view.Status)).To(Equal(to))
			Expect(stored.Status).To(Equal(to))
			Expect(res.Header.Get("ETag")).To(Equal(h.GET("/v1/trips/"+trip.ID, driverKey).Header.Get("ETag")),
				"the PUT answers the ETag a GET then gives")
			if from == to {
				return
			}
			switch to {
			case "in_progress":
				Expect(stored.PickupTime).To(BeTemporally(">=", before.Truncate(time.Microsecond)), "pickup_time becomes the actual time")
			case "completed":
				Expect(stored.CompletedAt).NotTo(BeNil())
				Expect(*view.CompletedAt).To(Equal(*stored.CompletedAt))
				var data map[string]any
				Expect(json.Unmarshal([]byte(events[0].Data), &data)).To(Succeed())
				Expect(data).To(Equal(map[string]any{
					"trip_id": trip.ID, "fare": map[string]any{"total": float64(trip.FareTotal), "currency": "usd"},
					"completed_at": stored.CompletedAt.Format(time.RFC3339Nano),
				}))
			case "cancelled":
				Expect(stored.CancelledAt).NotTo(BeNil())
			}
			if to != "completed" {
				var data map[string]any
				Expect(json.Unmarshal([]byte(events[0].Data), &data)).To(Succeed())
				Expect(data).To(Equal(map[string]any{
					"trip_id": trip.ID, "status": to, "occurred_at": stored.UpdatedAt.Format(time.RFC3339Nano),
				}))
			}
			driver, err := h.Store.DriverByID(ctx, trip.DriverID)
			Expect(err).NotTo(HaveOccurred())
			Expect(driver.Available).To(Equal(!activeStatus[to]), "a final status frees the driver")
		},
		transitionEntries(),
	)

	It("moves the driver to the drop-off when they complete the ride, and leaves them where they were when an admin does", func(ctx SpecContext) {
		for _, byDriver := range []bool{true, false} {
			trip, driverKey, _ := newTrip("in_progress")
			before, err := h.Store.DriverByID(ctx, trip.DriverID)
			Expect(err).NotTo(HaveOccurred())
			key := h.Admin
			if byDriver {
				key = driverKey
			}
			Expect(h.PutStatus(key, trip.ID, "completed", nil).Status).To(Equal(http.StatusOK))
			after, err := h.Store.DriverByID(ctx, trip.DriverID)
			Expect(err).NotTo(HaveOccurred())
			Expect(after.Available).To(BeTrue())
			if byDriver {
				Expect([]float64{after.Lat, after.Lng}).To(Equal([]float64{trip.DropoffLat, trip.DropoffLng}))
			} else {
				Expect([]float64{after.Lat, after.Lng}).To(Equal([]float64{before.Lat, before.Lng}),
					"a driver of the shared fleet is moved by their own reports only")
			}
		}
	})

	It("lets the trip's driver and admins move it, and nobody else", func() {
		trip, driverKey, riderKey := newTrip("accepted")
		ExpectProblem(h.PutStatus("", trip.ID, "arriving", nil), http.StatusUnauthorized, "unauthenticated")
		ExpectProblem(h.PutStatus(riderKey, trip.ID, "arriving", nil), http.StatusForbidden, "forbidden")
		// A driver reaches only the trips they drive: another's does not exist for them.
		otherDriver := h.Key(auth.RoleDriver, h.NewDriver(DriverOpts{}).ID)
		ExpectProblem(h.PutStatus(otherDriver, trip.ID, "arriving", nil), http.StatusNotFound, "not_found")
		ExpectProblem(h.PutStatus(h.Key(auth.RoleRider, h.NewRider().ID), trip.ID, "arriving", nil), http.StatusForbidden, "forbidden")
		ExpectProblem(h.PutStatus(h.Admin, "trp_aaaaaaaaaaaaaaaaaaaaaaaaaa", "arriving", nil), http.StatusNotFound, "not_found")
		ExpectProblem(h.PutStatus(h.Admin, "nope", "arriving", nil), http.StatusNotFound, "not_found")
		Expect(h.EventTypes(trip.ID)).To(BeEmpty(), "refusals change nothing")

		Expect(h.PutStatus(driverKey, trip.ID, "arriving", nil).Status).To(Equal(http.StatusOK))
		Expect(h.PutStatus(h.Admin, trip.ID, "in_progress", nil).Status).To(Equal(http.StatusOK))
		Expect(h.EventTypes(trip.ID)).To(Equal([]string{"trip.arriving", "trip.started"}))
	})

	It("validates the body", func() {
		trip, driverKey, _ := newTrip("accepted")
		ExpectProblem(h.PutStatus(driverKey, trip.ID, "teleported", nil), http.StatusBadRequest, "invalid_request")
		res := h.Do(Request{Method: http.MethodPut, Path: "/v1/trips/" + trip.ID, Key: driverKey,
			Body: map[string]any{"status": "arriving", "fare": 1}})
		ExpectProblem(res, http.StatusBadRequest, "invalid_request")
		res = h.Do(Request{Method: http.MethodPut, Path: "/v1/trips/" + trip.ID, Key: driverKey, Body: map[string]any{}})
		ExpectProblem(res, http.StatusBadRequest, "invalid_request")
	})

	Describe("racing changes of one trip", func() {
		// race runs a and b at the same moment and returns their answers.
		race := func(a, b func() *Response) (*Response, *Response) {
			var wg sync.WaitGroup
			var ra, rb *Response
			start := make(chan struct{})
			wg.Go(func() { defer GinkgoRecover(); <-start; ra = a() })
			wg.Go(func() { defer GinkgoRecover(); <-start; rb = b() })
			close(start)
			wg.Wait()
			return ra, rb
		}
		driverOf := func(ctx context.Context, trip store.Trip) store.Driver {
			d, err := h.Store.DriverByID(ctx, trip.DriverID)
			Expect(err).NotTo(HaveOccurred())
			return d
		}

		It("lets one of a start and a cancellation win, with one event, the driver freed only by the cancellation", func(ctx SpecContext) {
			for range 5 {
				trip, driverKey, riderKey := newTrip("arriving")
				started, cancelled := race(
					func() *Response { return h.PutStatus(driverKey, trip.ID, "in_progress", nil) },
					func() *Response { return h.Cancel(riderKey, trip.ID, "Changed my mind") })
				events := h.EventTypes(trip.ID)
				Expect(events).To(HaveLen(1), "one winner, one event")
				switch {
				case started.Status == http.StatusOK:
					ExpectProblem(cancelled, http.StatusConflict, "invalid_transition")
					Expect(events).To(Equal([]string{"trip.started"}))
					Expect(driverOf(ctx, trip).Available).To(BeFalse(), "the driver is on the trip")
				case cancelled.Status == http.StatusCreated:
					ExpectProblem(started, http.StatusConflict, "invalid_transition")
					Expect(events).To(Equal([]string{"trip.cancelled"}))
					Expect(driverOf(ctx, trip).Available).To(BeTrue(), "the cancellation freed the driver")
				default:
					Fail(fmt.Sprintf("no winner: %d %s / %d %s", started.Status, started.Body, cancelled.Status, cancelled.Body))
				}
			}
		})

		It("lets one of two changes with the same If-Match win; the other is 412 and changes nothing", func(ctx SpecContext) {
			for range 5 {
				trip, driverKey, _ := newTrip("in_progress")
				etag := h.GET("/v1/trips/"+trip.ID, driverKey).Header.Get("ETag")
				ifMatch := map[string]string{"If-Match": etag}
				a, b := race(
					func() *Response { return h.PutStatus(driverKey, trip.ID, "completed", ifMatch) },
					func() *Response { return h.PutStatus(h.Admin, trip.ID, "completed", ifMatch) })
				statuses := []int{a.Status, b.Status}
				Expect(statuses).To(ConsistOf(http.StatusOK, http.StatusPreconditionFailed), "%s / %s", a.Body, b.Body)
				Expect(h.EventTypes(trip.ID)).To(Equal([]string{"trip.completed"}))
				Expect(driverOf(ctx, trip).Available).To(BeTrue(), "the driver is free once the trip ended")
			}
		})
	})

	It("honours If-Match with the ETag of GET", func() {
		trip, driverKey, _ := newTrip("accepted")
		path := "/v1/trips/" + trip.ID
		etag := h.GET(path, driverKey).Header.Get("ETag")
		Expect(h.GET(path, h.Admin).Header.Get("ETag")).NotTo(Equal(etag),
			"an admin also sees where the driver is: another representation, another ETag")

		for _, stale := range []string{`"0123456789abcdef0123456789abcdef"`, "W/" + etag} {
			ExpectProblem(h.PutStatus(driverKey, trip.ID, "arriving", map[string]string{"If-Match": stale}),
				http.StatusPreconditionFailed, "precondition_failed")
		}
		Expect(h.EventTypes(trip.ID)).To(BeEmpty())

		res := h.PutStatus(driverKey, trip.ID, "arriving", map[string]string{"If-Match": `"other", ` + etag})
		Expect(res.Status).To(Equal(http.StatusOK), "%s", res.Body)
		newETag := res.Header.Get("ETag")
		Expect(newETag).NotTo(Equal(etag))
		Expect(h.GET(path, driverKey).Header.Get("ETag")).To(Equal(newETag))

		// The old ETag is stale now, even for a no-op; the new one and * hold.
		ExpectProblem(h.PutStatus(driverKey, trip.ID, "arriving", map[string]string{"If-Match": etag}),
			http.StatusPreconditionFailed, "precondition_failed")
		Expect(h.PutStatus(driverKey, trip.ID, "arriving", map[string]string{"If-Match": newETag}).Status).To(Equal(http.StatusOK))
		Expect(h.PutStatus(driverKey, trip.ID, "in_progress", map[string]string{"If-Match": "*"}).Status).To(Equal(http.StatusOK))
		Expect(h.EventTypes(trip.ID)).To(Equal([]string{"trip.arriving", "trip.started"}))
	})

	Describe("cancellation", func() {
		DescribeTable("by each party of a trip that has not started",
			func(ctx SpecContext, status, by string) {
				trip, driverKey, riderKey := newTrip(status)
				key := map[string]string{"rider": riderKey, "driver": driverKey, "admin": h.Admin}[by]
				before := time.Now().Truncate(time.Microsecond)
				res := h.Cancel(key, trip.ID, "Plans changed")
				Expect(res.Status).To(Equal(http.StatusCreated), "%s", res.Body)
				Expect(res.Header.Get("Location")).To(Equal("/v1/trips/" + trip.ID))
				var c gen.Cancellation
				res.Decode(&c)
				Expect(c.Id).To(MatchRegexp(`^can_[a-z2-7]{26}$`))
				Expect(c.TripId).To(Equal(trip.ID))
				Expect(c.Reason).To(Equal("Plans changed"))
				Expect(string(c.CancelledBy)).To(Equal(by))
				Expect(c.CreatedAt).To(BeTemporally(">=", before))

				stored, err := h.Store.TripByID(ctx, trip.ID)
				Expect(err).NotTo(HaveOccurred())
				Expect(stored.Status).To(Equal("cancelled"))
				Expect(*stored.CancelledAt).To(Equal(c.CreatedAt))
				driver, err := h.Store.DriverByID(ctx, trip.DriverID)
				Expect(err).NotTo(HaveOccurred())
				Expect(driver.Available).To(BeTrue(), "the driver is free again")
				Expect(h.EventTypes(trip.ID)).To(Equal([]string{"trip.cancelled"}))

				ExpectProblem(h.Cancel(key, trip.ID, "Again"), http.StatusConflict, "invalid_transition")
				Expect(h.EventTypes(trip.ID)).To(HaveLen(1))
			},
			Entry("accepted, by the rider", "accepted", "rider"),
			Entry("accepted, by the driver", "accepted", "driver"),
			Entry("arriving, by the rider", "arriving", "rider"),
			Entry("arriving, by an admin", "arriving", "admin"),
		)

		DescribeTable("is refused once the trip started or ended",
			func(status string) {
				trip, _, riderKey := newTrip(status)
				ExpectProblem(h.Cancel(riderKey, trip.ID, "Too late"), http.StatusConflict, "invalid_transition")
				ExpectProblem(h.Cancel(h.Admin, trip.ID, "Too late"), http.StatusConflict, "invalid_transition")
				Expect(h.EventTypes(trip.ID)).To(BeEmpty())
			},
			Entry("in progress", "in_progress"),
			Entry("completed", "completed"),
			Entry("cancelled", "cancelled"),
		)

		It("is refused to strangers, and needs a reason", func() {
			trip, _, riderKey := newTrip("accepted")
			ExpectProblem(h.Cancel("", trip.ID, "x"), http.StatusUnauthorized, "unauthenticated")
			ExpectProblem(h.Cancel(h.Key(auth.RoleRider, h.NewRider().ID), trip.ID, "x"), http.StatusForbidden, "forbidden")
			ExpectProblem(h.Cancel(h.Key(auth.RoleDriver, h.NewDriver(DriverOpts{}).ID), trip.ID, "x"), http.StatusNotFound, "not_found")
			ExpectProblem(h.Cancel(riderKey, "trp_aaaaaaaaaaaaaaaaaaaaaaaaaa", "x"), http.StatusNotFound, "not_found")
			for _, reason := range []string{"", "   ", strings.Repeat("x", 501)} {
				ExpectProblem(h.Cancel(riderKey, trip.ID, reason), http.StatusBadRequest, "invalid_request")
			}
			res := h.Do(Request{Method: http.MethodPost, Path: "/v1/trips/" + trip.ID + "/cancellations", Key: riderKey, Body: map[string]any{}})
			ExpectProblem(res, http.StatusBadRequest, "invalid_request")
			Expect(h.EventTypes(trip.ID)).To(BeEmpty())
			Expect(h.Cancel(riderKey, trip.ID, strings.Repeat("x", 500)).Status).To(Equal(http.StatusCreated))
		})
	})
})
