package ride_test

import (
	"math"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server/ride"
)

// east returns the point meters of great-circle distance east of p on the equator.
func east(meters float64) ride.Point {
	return ride.Point{Lat: 0, Lng: meters / (6_371_008.8 * math.Pi / 180)}
}

var _ = Describe("Dispatch", func() {
	origin := ride.Point{}

	DescribeTable("PickupETA rounds the road time at 30 km/h up to whole minutes",
		func(greatCircle float64, want time.Duration) {
			Expect(ride.PickupETA(origin, east(greatCircle))).To(Equal(want))
		},
		Entry("a driver at the pickup still needs a minute", 0.0, time.Minute),
		// 100 m × 1.3 = 130 m = 15.6 s.
		Entry("a few seconds round up to a minute", 100.0, time.Minute),
		// 3500 m × 1.3 = 4550 m = 9.1 min.
		Entry("9.1 minutes are 10", 3_500.0, 10*time.Minute),
		// 10 km × 1.3 = 13 km = 26 min.
		Entry("whole minutes stay", 10_000.0, 26*time.Minute),
	)

	DescribeTable("DriverPayout is 75 % rounded half up",
		func(fare, want int64) { Expect(ride.DriverPayout(fare)).To(Equal(want)) },
		Entry("1850 → 1387.5 → 1388", int64(1850), int64(1388)),
		Entry("1000 → 750", int64(1000), int64(750)),
		Entry("zero", int64(0), int64(0)),
	)

	DescribeTable("PlatformCost is 2.9 % + 30 rounded half up",
		func(fare, want int64) { Expect(ride.PlatformCost(fare)).To(Equal(want)) },
		Entry("1850 → 53.65 → 54, + 30", int64(1850), int64(84)),
		Entry("1000 → 29, + 30", int64(1000), int64(59)),
		Entry("zero costs the fixed fee", int64(0), int64(30)),
	)

	DescribeTable("MatchingScore weighs proximity 0.8 and rating 0.2",
		func(meters, rating, want float64) { Expect(ride.MatchingScore(meters, rating)).To(Equal(want)) },
		Entry("at the pickup with a perfect rating", 0.0, 5.0, 1.0),
		Entry("2 km away, unrated", 2_000.0, 0.0, 0.4),
		Entry("6 km away, rated 4", 6_000.0, 4.0, 0.36),
		Entry("a rating above 5 counts as 5", 0.0, 7.0, 1.0),
	)

	It("encodes polylines as Google's reference example", func() {
		points := []ride.Point{{Lat: 38.5, Lng: -120.2}, {Lat: 40.7, Lng: -120.95}, {Lat: 43.252, Lng: -126.453}}
		Expect(ride.EncodePolyline(points)).To(Equal("_p~iF~ps|U_ulLnnqC_mqNvxq`@"))
		Expect(ride.EncodePolyline(nil)).To(BeEmpty())
	})
})

var _ = Describe("Fare estimates", func() {
	expires := time.Date(2026, 11, 21, 12, 5, 0, 0, time.UTC)

	DescribeTable("EstimateStatusAt and CheckBookable",
		func(now time.Time, used bool, want ride.EstimateStatus, wantErr error) {
			Expect(ride.EstimateStatusAt(now, expires, used)).To(Equal(want))
			if wantErr == nil {
				Expect(ride.CheckBookable(now, expires, used)).To(Succeed())
			} else {
				Expect(ride.CheckBookable(now, expires, used)).To(MatchError(wantErr))
			}
		},
		Entry("valid before expiry", expires.Add(-time.Microsecond), false, ride.EstimateValid, nil),
		Entry("expired at the expiry instant", expires, false, ride.EstimateExpired, ride.ErrEstimateExpired),
		Entry("expired after it", expires.Add(time.Hour), false, ride.EstimateExpired, ride.ErrEstimateExpired),
		Entry("used before expiry", expires.Add(-time.Minute), true, ride.EstimateUsed, ride.ErrEstimateAlreadyUsed),
		Entry("used stays used after expiry", expires.Add(time.Hour), true, ride.EstimateUsed, ride.ErrEstimateAlreadyUsed),
	)

	It("tells whether a point lies in a service area", func() {
		area := ride.ServiceArea{ID: "equator", Center: origin(), RadiusMeters: 1_000}
		Expect(ride.InServiceArea(east(999), area)).To(BeTrue())
		Expect(ride.InServiceArea(east(1_001), area)).To(BeFalse())
	})
})

func origin() ride.Point { return ride.Point{} }

var _ = Describe("LiveETA", func() {
	pickup := ride.Point{Lat: 37.7749, Lng: -122.4194}
	booked := 11

	It("is counted from the driver's reported position while the driver is on the way", func() {
		near := ride.Point{Lat: 37.7840, Lng: -122.4194} // about a kilometre north
		for _, status := range []ride.TripStatus{ride.StatusAccepted, ride.StatusArriving} {
			eta := ride.LiveETA(status, &booked, pickup, &near)
			Expect(eta).NotTo(BeNil())
			Expect(*eta).To(Equal(int(ride.PickupETA(near, pickup) / time.Minute)))
			Expect(*eta).To(BeNumerically("<", booked))
		}
	})

	It("falls back to the booking's estimate before the driver reports a position", func() {
		Expect(ride.LiveETA(ride.StatusAccepted, &booked, pickup, nil)).To(HaveValue(Equal(11)))
	})

	It("is absent after pickup and on final trips, whatever was stored", func() {
		for _, status := range []ride.TripStatus{ride.StatusInProgress, ride.StatusCompleted, ride.StatusCancelled} {
			Expect(ride.LiveETA(status, &booked, pickup, &pickup)).To(BeNil(), string(status))
		}
	})
})
