package tests

import (
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/store"
)

var _ = ForEachEngine("Fare estimates", func(h *Harness) {
	var city store.City
	var rider store.Rider
	var riderKey string
	BeforeEach(func() {
		city = h.NewCity(CityOpts{})
		rider = h.NewRider()
		riderKey = h.Key(auth.RoleRider, rider.ID)
	})

	post := func(key string, body any) *Response {
		return h.Do(Request{Method: http.MethodPost, Path: "/v1/fare-estimates", Key: key, Body: body})
	}

	// From the city's center to 10 km north: 10 km great-circle × 1.3 = 13 km of road, 1560 s
	// at 30 km/h. Economy: 250 + 120 × 13 + 30 × 26 = 2590; range 90 % … 115 %, half up.
	DescribeTable("price each ride type from the city's rates, hand-computed",
		func(rideType string, min, max int64) {
			res := post(riderKey, map[string]any{
				"origin": loc(city, 0, 0), "destination": loc(city, 10_000, 0), "ride_type": rideType,
			})
			Expect(res.Status).To(Equal(http.StatusCreated), "%s", res.Body)
			var e gen.FareEstimate
			res.Decode(&e)
			Expect(res.Header.Get("Location")).To(Equal("/v1/fare-estimates/" + e.EstimateId))
			Expect(e.EstimateId).To(MatchRegexp(`^est_[a-z2-7]{26}$`))
			Expect(e.PriceRange).To(Equal(gen.PriceRange{Min: min, Max: max, Currency: "usd"}))
			Expect(e.DistanceMeters).To(BeEquivalentTo(13_000))
			Expect(e.DurationSeconds).To(BeEquivalentTo(1_560))
			Expect(string(e.RideType)).To(Equal(rideType))
			Expect(e.City).To(Equal(city.ID))
			Expect(e.Status).To(Equal(gen.FareEstimateStatus("valid")))
			Expect(e.ExpirySeconds).To(BeEquivalentTo(300))
			Expect(e.ExpiresAt.Sub(e.CreatedAt)).To(Equal(300 * time.Second))
			Expect(e.TripId).To(BeNil())
		},
		Entry("economy: 2590 → 2331 … 2978.5 → 2979", "economy", int64(2331), int64(2979)),
		Entry("comfort: 2590 × 1.35 = 3496.5 → 3497 → 3147 … 4022", "comfort", int64(3147), int64(4022)),
		Entry("xl: 2590 × 1.75 = 4532.5 → 4533 → 4080 … 5213", "xl", int64(4080), int64(5213)),
	)

	It("charges the city's minimum fare for a short hop, in the city's currency", func() {
		gbp := h.NewCity(CityOpts{Currency: "gbp"})
		res := post(riderKey, map[string]any{"origin": loc(gbp, 0, 0), "destination": loc(gbp, 100, 0), "ride_type": "economy"})
		Expect(res.Status).To(Equal(http.StatusCreated))
		var e gen.FareEstimate
		res.Decode(&e)
		// 130 m of road: 250 + 15.6 + 7.8 → 273 < 700, so 700; 700 … 805.
		Expect(e.PriceRange).To(Equal(gen.PriceRange{Min: 700, Max: 805, Currency: "gbp"}))
	})

	It("reads back for its creator and an admin, and for nobody else", func() {
		e := h.NewEstimate(riderKey, city)
		path := "/v1/fare-estimates/" + e.EstimateId
		for _, key := range []string{riderKey, h.Admin} {
			res := h.GET(path, key)
			Expect(res.Status).To(Equal(http.StatusOK))
			var got gen.FareEstimate
			res.Decode(&got)
			Expect(got).To(Equal(e))
			Expect(res.Header.Get("ETag")).NotTo(BeEmpty())
		}
		other := h.Key(auth.RoleRider, h.NewRider().ID)
		ExpectProblem(h.GET(path, other), http.StatusForbidden, "forbidden")
		// Another account's rider and admin do not see it at all.
		ExpectProblem(h.GET(path, h.KeyIn(auth.RoleRider, h.NewRiderIn("acct_other").ID, "acct_other")), http.StatusNotFound, "not_found")
		ExpectProblem(h.GET(path, h.KeyIn(auth.RoleAdmin, "", "acct_other")), http.StatusNotFound, "not_found")
		ExpectProblem(h.GET(path, h.Key(auth.RoleDriver, h.NewDriver(DriverOpts{City: city.ID}).ID)), http.StatusForbidden, "forbidden")
		ExpectProblem(h.GET(path, ""), http.StatusUnauthorized, "unauthenticated")
		ExpectProblem(h.GET("/v1/fare-estimates/est_aaaaaaaaaaaaaaaaaaaaaaaaaa", riderKey), http.StatusNotFound, "not_found")
		ExpectProblem(h.GET("/v1/fare-estimates/trp_nope", riderKey), http.StatusNotFound, "not_found")
	})

	It("may be asked by riders and admins, not drivers", func() {
		Expect(post(h.Admin, estimateBody(city, "xl")).Status).To(Equal(http.StatusCreated))
		driver := h.NewDriver(DriverOpts{City: city.ID})
		ExpectProblem(post(h.Key(auth.RoleDriver, driver.ID), estimateBody(city, "economy")), http.StatusForbidden, "forbidden")
		ExpectProblem(post("", estimateBody(city, "economy")), http.StatusUnauthorized, "unauthenticated")
	})

	It("refuses routes that leave the origin's city", func() {
		far := map[string]any{"lat": 80.0, "lng": 0.0} // no test city is near the pole
		ExpectProblem(post(riderKey, map[string]any{"origin": far, "destination": loc(city, 0, 0), "ride_type": "economy"}),
			http.StatusUnprocessableEntity, "outside_service_area")
		ExpectProblem(post(riderKey, map[string]any{"origin": loc(city, 0, 0), "destination": loc(city, 31_000, 0), "ride_type": "economy"}),
			http.StatusUnprocessableEntity, "outside_service_area")
		other := h.NewCity(CityOpts{})
		ExpectProblem(post(riderKey, map[string]any{"origin": loc(city, 0, 0), "destination": loc(other, 0, 0), "ride_type": "economy"}),
			http.StatusUnprocessableEntity, "outside_service_area")
	})

	It("rejects malformed requests with 400 naming the field", func() {
		cases := map[string]any{
			"body.ride_type":  map[string]any{"origin": loc(city, 0, 0), "destination": loc(city, 10, 0), "ride_type": "limo"},
			"body.origin.lat": map[string]any{"origin": map[string]any{"lat": 91, "lng": 0}, "destination": loc(city, 10, 0), "ride_type": "xl"},
		}
		for location, body := range cases {
			res := post(riderKey, body)
			ExpectProblem(res, http.StatusBadRequest, "invalid_request")
			Expect(*res.Problem().Errors).To(ContainElement(HaveField("Location", HavePrefix(location))), location)
		}
		// An unknown member is named as the input at fault, as an unknown query parameter is.
		res := post(riderKey, map[string]any{"origin": loc(city, 0, 0), "destination": loc(city, 10, 0), "ride_type": "xl", "tip": 5})
		ExpectProblem(res, http.StatusBadRequest, "invalid_request")
		Expect(*res.Problem().Errors).To(ContainElement(gen.ProblemFieldError{Location: "body.tip", Message: "is not a member of this object"}))
		res = post(riderKey, map[string]any{"origin": loc(city, 0, 0), "ride_type": "economy"})
		ExpectProblem(res, http.StatusBadRequest, "invalid_request")
		ExpectProblem(post(riderKey, `{"origin":`), http.StatusBadRequest, "malformed_json")
	})

	It("expire after their lifetime, on an injected clock", func() {
		clock := NewFakeClock(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC))
		clocked := h.WithClock(clock.Now)
		e := clocked.NewEstimate(riderKey, city)
		Expect(e.CreatedAt).To(Equal(clock.Now()))
		path := "/v1/fare-estimates/" + e.EstimateId

		clock.Advance(299 * time.Second)
		var got gen.FareEstimate
		clocked.GET(path, riderKey).Decode(&got)
		Expect(got.Status).To(Equal(gen.FareEstimateStatus("valid")))

		clock.Advance(time.Second)
		clocked.GET(path, riderKey).Decode(&got)
		Expect(got.Status).To(Equal(gen.FareEstimateStatus("expired")))

		h.NewDriver(DriverOpts{City: city.ID})
		res := clocked.Book(riderKey, map[string]any{"estimate_id": e.EstimateId})
		ExpectProblem(res, http.StatusUnprocessableEntity, "estimate_expired")
	})
})
