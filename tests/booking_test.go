package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/store/storetest"
)

var _ = ForEachEngine("Booking a ride", func(h *Harness) {
	var city store.City
	var rider store.Rider
	var riderKey string
	BeforeEach(func() {
		city = h.NewCity(CityOpts{})
		rider = h.NewRider()
		riderKey = h.Key(auth.RoleRider, rider.ID)
	})

	It("gives the rider the nearest free driver at the estimate's upper price, in one transaction", func(ctx SpecContext) {
		// The estimate's origin is 2 km north, 1 km east of the center.
		h.NewDriver(DriverOpts{City: city.ID, North: 2_000, East: 1_100, Unavailable: true})
		near := h.NewDriver(DriverOpts{City: city.ID, North: 2_000, East: 3_000}) // 2 km from the pickup
		h.NewDriver(DriverOpts{City: city.ID, North: -5_000})
		e := h.NewEstimate(riderKey, city)

		res := h.Book(riderKey, map[string]any{"estimate_id": e.EstimateId})
		Expect(res.Status).To(Equal(http.StatusCreated), "%s", res.Body)
		var trip gen.Trip
		res.Decode(&trip)
		Expect(res.Header.Get("Location")).To(Equal("/v1/trips/" + trip.Id))
		Expect(trip.Id).To(MatchRegexp(`^trp_[a-z2-7]{26}$`))
		Expect(trip.Status).To(Equal(gen.TripStatus("accepted")))
		Expect(trip.DriverSummary.Id).To(Equal(near.ID))
		Expect(*trip.RiderId).To(Equal(rider.ID))
		Expect(*trip.City).To(Equal(city.ID))
		Expect(string(*trip.RideType)).To(Equal("economy"))
		Expect(*trip.Fare).To(Equal(gen.Money{Total: e.PriceRange.Max, Currency: "usd"}))
		Expect(*trip.Pickup).To(Equal(e.Origin))
		Expect(*trip.Dropoff).To(Equal(e.Destination))
		// 2 km × 1.3 = 2.6 km at 30 km/h = 5.2 min → 6.
		Expect(*trip.EtaMinutes).To(BeEquivalentTo(6))
		Expect(trip.PickupTime.Sub(*trip.CreatedAt)).To(Equal(6 * time.Minute))

		// The trip reads back the same, the driver is taken, the estimate used, the event written.
		var again gen.Trip
		h.GET("/v1/trips/"+trip.Id, riderKey).Decode(&again)
		Expect(again).To(Equal(trip))
		d, err := h.Store.DriverByID(ctx, near.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Available).To(BeFalse())
		var used gen.FareEstimate
		h.GET("/v1/fare-estimates/"+e.EstimateId, riderKey).Decode(&used)
		Expect(used.Status).To(Equal(gen.FareEstimateStatus("used")))
		Expect(*used.TripId).To(Equal(trip.Id))
		events, err := h.Store.EventsBySubject(ctx, trip.Id)
		Expect(err).NotTo(HaveOccurred())
		Expect(events).To(HaveLen(1))
		Expect(events[0].Type).To(Equal("trip.created"))
		Expect(events[0].ID).To(HavePrefix("evt_"))
		var data map[string]any
		Expect(json.Unmarshal([]byte(events[0].Data), &data)).To(Succeed())
		Expect(data).To(Equal(map[string]any{
			"trip_id": trip.Id, "status": "accepted", "occurred_at": trip.CreatedAt.Format(time.RFC3339Nano),
		}))

		// Internal figures are stored, and only stored: the API's reads leave them out, so
		// the whole row is read through the model.
		stored, err := storetest.TripRow(ctx, h.Store, trip.Id)
		Expect(err).NotTo(HaveOccurred())
		Expect(stored.RoutePolyline).NotTo(BeEmpty())
		Expect(stored.MatchingScore).To(BeNumerically(">", 0))
		Expect(stored.DriverPayout).To(Equal((e.PriceRange.Max*75 + 50) / 100))
		Expect(stored.PlatformCost).To(BeNumerically(">", 30))
	})

	It("lets an admin book any estimate for a named rider", func() {
		h.NewDriver(DriverOpts{City: city.ID})
		e := h.NewEstimate(riderKey, city)
		ExpectProblem(h.Book(h.Admin, map[string]any{"estimate_id": e.EstimateId}), http.StatusUnprocessableEntity, "rider_id_required")
		ExpectProblem(h.Book(h.Admin, map[string]any{"estimate_id": e.EstimateId, "rider_id": "rdr_aaaaaaaaaaaaaaaaaaaaaaaaaa"}),
			http.StatusUnprocessableEntity, "rider_not_found")
		other := h.NewRider()
		res := h.Book(h.Admin, map[string]any{"estimate_id": e.EstimateId, "rider_id": other.ID})
		Expect(res.Status).To(Equal(http.StatusCreated), "%s", res.Body)
		var trip gen.Trip
		res.Decode(&trip)
		Expect(*trip.RiderId).To(Equal(other.ID))
	})

	It("refuses drivers, strangers' rider ids and requests without a key or Idempotency-Key", func() {
		e := h.NewEstimate(riderKey, city)
		driver := h.NewDriver(DriverOpts{City: city.ID})
		ExpectProblem(h.Book(h.Key(auth.RoleDriver, driver.ID), map[string]any{"estimate_id": e.EstimateId}), http.StatusForbidden, "forbidden")
		ExpectProblem(h.Book(riderKey, map[string]any{"estimate_id": e.EstimateId, "rider_id": h.NewRider().ID}), http.StatusForbidden, "forbidden")
		ExpectProblem(h.Book("", map[string]any{"estimate_id": e.EstimateId}), http.StatusUnauthorized, "unauthenticated")
		res := h.Do(Request{Method: http.MethodPost, Path: "/v1/rides", Key: riderKey, Body: map[string]any{"estimate_id": e.EstimateId}})
		ExpectProblem(res, http.StatusBadRequest, "idempotency_key_required")
		ExpectProblem(h.Book(riderKey, map[string]any{}), http.StatusBadRequest, "invalid_request")

		// None of it consumed the estimate or the driver.
		Expect(h.BookTrip(riderKey, e.EstimateId).DriverSummary.Id).To(Equal(driver.ID))
	})

	It("answers an admin naming another account's rider, free or busy, exactly as a missing rider", func() {
		other := newAccount("riders")
		free, busy := h.NewRiderIn(other), h.NewRiderIn(other)
		busyKey := h.KeyIn(auth.RoleRider, busy.ID, other)
		h.NewDriver(DriverOpts{City: city.ID})
		h.BookTrip(busyKey, h.NewEstimate(busyKey, city).EstimateId)

		// Status, body and headers, less what differs for every request.
		answer := func(riderID string) string {
			e := h.NewEstimate(h.Admin, city)
			res := h.Book(h.Admin, map[string]any{"estimate_id": e.EstimateId, "rider_id": riderID})
			Expect(res.Status).To(Equal(http.StatusUnprocessableEntity), "%s", res.Body)
			Expect(res.Problem().Code).To(Equal("rider_not_found"))
			Expect(h.GET("/v1/fare-estimates/"+e.EstimateId, h.Admin).JSON()["status"]).To(Equal("valid"), "the refusal kept the estimate")
			var body map[string]any
			Expect(json.Unmarshal(res.Body, &body)).To(Succeed())
			delete(body, "request_id")
			header := res.Header.Clone()
			header.Del("Date")
			header.Del("X-Request-Id")
			return fmt.Sprint(res.Status, body, header)
		}
		missing := answer("rdr_aaaaaaaaaaaaaaaaaaaaaaaaaa")
		Expect(missing).To(ContainSubstring("body.rider_id"))
		Expect(answer(free.ID)).To(Equal(missing))
		Expect(answer(busy.ID)).To(Equal(missing))
	})

	It("answers each reason a booking cannot happen with its own code, and changes nothing", func(ctx SpecContext) {
		// Unknown, malformed, someone else's: all "not found".
		ExpectProblem(h.Book(riderKey, map[string]any{"estimate_id": "est_aaaaaaaaaaaaaaaaaaaaaaaaaa"}), http.StatusUnprocessableEntity, "estimate_not_found")
		ExpectProblem(h.Book(riderKey, map[string]any{"estimate_id": "nope"}), http.StatusUnprocessableEntity, "estimate_not_found")
		theirs := h.NewEstimate(h.Key(auth.RoleRider, h.NewRider().ID), city)
		ExpectProblem(h.Book(riderKey, map[string]any{"estimate_id": theirs.EstimateId}), http.StatusUnprocessableEntity, "estimate_not_found")
		adminEstimate := h.NewEstimate(h.Admin, city)
		ExpectProblem(h.Book(riderKey, map[string]any{"estimate_id": adminEstimate.EstimateId}), http.StatusUnprocessableEntity, "estimate_not_found")

		// No free driver: the estimate stays valid.
		h.NewDriver(DriverOpts{City: city.ID, Unavailable: true})
		e := h.NewEstimate(riderKey, city)
		ExpectProblem(h.Book(riderKey, map[string]any{"estimate_id": e.EstimateId}), http.StatusConflict, "no_driver_available")
		var still gen.FareEstimate
		h.GET("/v1/fare-estimates/"+e.EstimateId, riderKey).Decode(&still)
		Expect(still.Status).To(Equal(gen.FareEstimateStatus("valid")))

		// Booked once; a second booking of it, even with a new key, is a conflict.
		h.NewDriver(DriverOpts{City: city.ID})
		trip := h.BookTrip(riderKey, e.EstimateId)
		ExpectProblem(h.Book(riderKey, map[string]any{"estimate_id": e.EstimateId}), http.StatusConflict, "estimate_already_used")

		// One active trip per rider: a second estimate cannot be booked, and takes no driver.
		spare := h.NewDriver(DriverOpts{City: city.ID})
		second := h.NewEstimate(riderKey, city)
		ExpectProblem(h.Book(riderKey, map[string]any{"estimate_id": second.EstimateId}), http.StatusConflict, "rider_has_active_trip")
		d, err := h.Store.DriverByID(ctx, spare.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Available).To(BeTrue())

		// Once the trip ends, the rider books again.
		Expect(h.Cancel(riderKey, trip.Id, "Changed my mind").Status).To(Equal(http.StatusCreated))
		Expect(h.BookTrip(riderKey, second.EstimateId).DriverSummary.Id).NotTo(BeEmpty())
		Expect(h.EventTypes(trip.Id)).To(Equal([]string{"trip.created", "trip.cancelled"}))
	})

	// race books each body at once, each with its own Idempotency-Key, and returns the answers.
	race := func(keys []string, bodies []map[string]any) []*Response {
		answers := make([]*Response, len(bodies))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range bodies {
			wg.Go(func() {
				defer GinkgoRecover()
				<-start
				answers[i] = h.Book(keys[i], bodies[i])
			})
		}
		close(start)
		wg.Wait()
		return answers
	}
	// tally counts answers by status and code; it fails on anything but 201 and the one 409 code.
	tally := func(answers []*Response, conflictCode string) (created int) {
		GinkgoHelper()
		for i, res := range answers {
			switch res.Status {
			case http.StatusCreated:
				created++
			case http.StatusConflict:
				Expect(res.Problem().Code).To(Equal(conflictCode), "booking %d", i)
			default:
				Fail(fmt.Sprintf("booking %d answered %d: %s", i, res.Status, res.Body))
			}
		}
		return created
	}

	It("leaves nothing behind when a step fails after the driver is claimed: driver free, estimate valid, key free", func() {
		driver := h.NewDriver(DriverOpts{City: city.ID})
		e := h.NewEstimate(riderKey, city)
		claimed := 0
		h.SetFault(func(_ context.Context, point, subject string) error {
			if point == "booking.driver_claimed" && subject == driver.ID {
				claimed++
				if claimed == 1 {
					return errors.New("the step after the claim failed")
				}
			}
			return nil
		})
		key := newIdempotencyKey()
		book := func() *Response {
			return h.Do(Request{Method: http.MethodPost, Path: "/v1/rides", Key: riderKey,
				Body: map[string]any{"estimate_id": e.EstimateId}, Header: map[string]string{"Idempotency-Key": key}})
		}
		ExpectProblem(book(), http.StatusInternalServerError, "internal")

		again, err := h.Store.DriverByID(GinkgoT().Context(), driver.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(again.Available).To(BeTrue(), "the driver is free again")
		var still gen.FareEstimate
		h.GET("/v1/fare-estimates/"+e.EstimateId, riderKey).Decode(&still)
		Expect(still.Status).To(Equal(gen.FareEstimateStatus("valid")))
		Expect(still.TripId).To(BeNil())
		var trips gen.TripList
		h.GET("/v1/trips", riderKey).Decode(&trips)
		Expect(trips.Data).To(BeEmpty(), "no trip (nor its event, written in the same transaction)")

		// The same key books for real: it was not kept for the failed attempt.
		res := book()
		Expect(res.Status).To(Equal(http.StatusCreated), "%s", res.Body)
		Expect(res.Header.Get("Idempotent-Replayed")).To(BeEmpty())
		Expect(claimed).To(Equal(2))
	})

	It("books an estimate once when it is sent eight times at once", func() {
		for range 8 {
			h.NewDriver(DriverOpts{City: city.ID})
		}
		e := h.NewEstimate(riderKey, city)
		keys, bodies := make([]string, 8), make([]map[string]any, 8)
		for i := range keys {
			keys[i], bodies[i] = riderKey, map[string]any{"estimate_id": e.EstimateId}
		}
		Expect(tally(race(keys, bodies), "estimate_already_used")).To(Equal(1))
	})

	It("gives a rider one trip when they book eight estimates at once", func(ctx SpecContext) {
		for range 8 {
			h.NewDriver(DriverOpts{City: city.ID})
		}
		keys, bodies := make([]string, 8), make([]map[string]any, 8)
		for i := range keys {
			keys[i], bodies[i] = riderKey, map[string]any{"estimate_id": h.NewEstimate(riderKey, city).EstimateId}
		}
		Expect(tally(race(keys, bodies), "rider_has_active_trip")).To(Equal(1))
		page, err := h.Store.ListTrips(ctx, store.TripListParams{Filter: store.TripFilter{City: city.ID}, Limit: 100})
		Expect(err).NotTo(HaveOccurred())
		Expect(page.Trips).To(HaveLen(1), "one trip, and so one driver taken")
	})

	It("never gives one driver to two of 40 concurrent bookings", func(ctx SpecContext) {
		const bookings, drivers = 40, 5
		for i := range drivers {
			h.NewDriver(DriverOpts{City: city.ID, North: float64(i * 500)})
		}
		keys := make([]string, bookings)
		estimates := make([]string, bookings)
		for i := range bookings {
			keys[i] = h.Key(auth.RoleRider, h.NewRider().ID)
			estimates[i] = h.NewEstimate(keys[i], city).EstimateId
		}

		statuses := make([]int, bookings)
		codes := make([]string, bookings)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range bookings {
			wg.Go(func() {
				defer GinkgoRecover()
				<-start
				res := h.Book(keys[i], map[string]any{"estimate_id": estimates[i]})
				statuses[i] = res.Status
				if res.Status >= 400 {
					codes[i] = res.Problem().Code
				}
			})
		}
		began := time.Now()
		close(start)
		wg.Wait()
		elapsed := time.Since(began)

		var created, conflicts int
		for i, status := range statuses {
			Expect(status).To(BeNumerically("<", 500), "booking %d", i)
			switch status {
			case http.StatusCreated:
				created++
			case http.StatusConflict:
				conflicts++
				Expect(codes[i]).To(Equal("no_driver_available"))
			default:
				Fail(fmt.Sprintf("booking %d answered %d", i, status))
			}
		}
		Expect(created).To(Equal(drivers))
		Expect(conflicts).To(Equal(bookings - drivers))

		// The database agrees: five active trips on five different drivers, none free.
		page, err := h.Store.ListTrips(ctx, store.TripListParams{Filter: store.TripFilter{City: city.ID}, Limit: 100})
		Expect(err).NotTo(HaveOccurred())
		Expect(page.Trips).To(HaveLen(drivers))
		seen := map[string]bool{}
		for _, t := range page.Trips {
			Expect(t.Status).To(Equal("accepted"))
			Expect(seen[t.DriverID]).To(BeFalse(), "driver %s has two active trips", t.DriverID)
			seen[t.DriverID] = true
			driver, err := h.Store.DriverByID(ctx, t.DriverID)
			Expect(err).NotTo(HaveOccurred())
			Expect(driver.Available).To(BeFalse())
		}
		AddReportEntry(fmt.Sprintf("concurrent bookings [%s]", h.Engine),
			fmt.Sprintf("%d bookings, %d drivers: %d created, %d no_driver_available, 0 5xx, in %s",
				bookings, drivers, created, conflicts, elapsed.Round(time.Millisecond)),
			ReportEntryVisibilityAlways)
	})
})
