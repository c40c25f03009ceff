package ride_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server/ride"
)

var _ = Describe("Fares", func() {
	// city is a realistic rate card: $2.50 base, $1.20/km, $0.30/min, $7.00 minimum.
	city := ride.Rates{Currency: "usd", BaseFare: 250, PerKm: 120, PerMinute: 30, MinimumFare: 700}
	// plain makes rounding visible: $1.00 base, $1.00/km, no time charge, no minimum.
	plain := ride.Rates{Currency: "usd", BaseFare: 100, PerKm: 100}

	DescribeTable("QuoteDistance (hand-computed)",
		func(meters int64, rt ride.RideType, r ride.Rates, want ride.Quote) {
			Expect(ride.QuoteDistance(meters, rt, r)).To(Equal(want))
		},
		// 10 km at 30 km/h = 1200 s = 20 min; 250 + 120×10 + 30×20 = 2050.
		// Min 2050×0.9 = 1845; Max 2050×1.15 = 2357.5 → 2358 (half up).
		Entry("economy, 10 km", int64(10_000), ride.RideEconomy, city,
			ride.Quote{DistanceMeters: 10_000, DurationSeconds: 1200, Total: 2050, Min: 1845, Max: 2358, Currency: "usd"}),
		// 2050 × 1.35 = 2767.5 → 2768; Min 2491.2 → 2491; Max 3183.2 → 3183.
		Entry("comfort, 10 km", int64(10_000), ride.RideComfort, city,
			ride.Quote{DistanceMeters: 10_000, DurationSeconds: 1200, Total: 2768, Min: 2491, Max: 3183, Currency: "usd"}),
		// 2050 × 1.75 = 3587.5 → 3588; Min 3229.2 → 3229; Max 4126.2 → 4126.
		Entry("xl, 10 km", int64(10_000), ride.RideXL, city,
			ride.Quote{DistanceMeters: 10_000, DurationSeconds: 1200, Total: 3588, Min: 3229, Max: 4126, Currency: "usd"}),
		// 1 km = 120 s = 2 min; 250 + 120 + 60 = 430 < 700 → Total 700;
		// Min max(630, 700) = 700; Max 700×1.15 = 805.
		Entry("economy below the minimum fare", int64(1_000), ride.RideEconomy, city,
			ride.Quote{DistanceMeters: 1_000, DurationSeconds: 120, Total: 700, Min: 700, Max: 805, Currency: "usd"}),
		// 430 × 1.75 = 752.5 → 753 (above the minimum); Min 677.7 → 678, raised to 700;
		// Max 753×1.15 = 865.95 → 866.
		Entry("xl where only the lower bound hits the minimum", int64(1_000), ride.RideXL, city,
			ride.Quote{DistanceMeters: 1_000, DurationSeconds: 120, Total: 753, Min: 700, Max: 866, Currency: "usd"}),
		// Base 250 alone < 700 → the minimum fare.
		Entry("zero distance pays the minimum", int64(0), ride.RideEconomy, city,
			ride.Quote{DistanceMeters: 0, DurationSeconds: 0, Total: 700, Min: 700, Max: 805, Currency: "usd"}),
		// Base 100; Min 90; Max 115.
		Entry("zero distance without a minimum pays the base", int64(0), ride.RideEconomy, plain,
			ride.Quote{DistanceMeters: 0, DurationSeconds: 0, Total: 100, Min: 90, Max: 115, Currency: "usd"}),
		// 5 m: duration 0.6 s → 1 s; 100 + 100×0.005 = 100.5 → 101 (half up);
		// Min 90.9 → 91; Max 116.15 → 116.
		Entry("point price rounds half up", int64(5), ride.RideEconomy, plain,
			ride.Quote{DistanceMeters: 5, DurationSeconds: 1, Total: 101, Min: 91, Max: 116, Currency: "usd"}),
		// 4 m: duration 0.48 s → 0 s; 100.4 → 100; Min 90; Max 115.
		Entry("point price rounds below half down", int64(4), ride.RideEconomy, plain,
			ride.Quote{DistanceMeters: 4, DurationSeconds: 0, Total: 100, Min: 90, Max: 115, Currency: "usd"}),
		// Total 5; Min 4.5 → 5 (half up); Max 5.75 → 6.
		Entry("range bounds round half up", int64(0), ride.RideEconomy, ride.Rates{Currency: "usd", BaseFare: 5},
			ride.Quote{DistanceMeters: 0, DurationSeconds: 0, Total: 5, Min: 5, Max: 6, Currency: "usd"}),
		// 4000 km = 480000 s = 8000 min; 250 + 480000 + 240000 = 720250; ×1.35 = 972337.5 → 972338;
		// Min 875104.2 → 875104; Max 1118188.7 → 1118189.
		Entry("a long trip stays exact", int64(4_000_000), ride.RideComfort, city,
			ride.Quote{DistanceMeters: 4_000_000, DurationSeconds: 480_000, Total: 972_338, Min: 875_104, Max: 1_118_189, Currency: "usd"}),
		// Same as zero distance.
		Entry("negative distance counts as zero", int64(-10), ride.RideEconomy, city,
			ride.Quote{DistanceMeters: 0, DurationSeconds: 0, Total: 700, Min: 700, Max: 805, Currency: "usd"}),
	)

	DescribeTable("QuoteFare from coordinates",
		func(from, to ride.Point, rt ride.RideType, want ride.Quote) {
			Expect(ride.QuoteFare(from, to, rt, city)).To(Equal(want))
			Expect(ride.QuoteFare(to, from, rt, city)).To(Equal(want), "symmetric")
		},
		// 0.09° of latitude = 6371008.8 m × 0.0015708 = 10007.557 m; ×1.3 = 13009.82 → 13010 m.
		// 13010 m × 0.12 s/m = 1561.2 → 1561 s. 250 + 120×13.01 + 30×1561/60
		// = 250 + 1561.2 + 780.5 = 2591.7 → 2592; Min 2332.8 → 2333; Max 2980.8 → 2981.
		Entry("0.09° along the equator's meridian", ride.Point{}, ride.Point{Lat: 0.09}, ride.RideEconomy,
			ride.Quote{DistanceMeters: 13_010, DurationSeconds: 1561, Total: 2592, Min: 2333, Max: 2981, Currency: "usd"}),
		Entry("same point", ride.Point{Lat: 37.7749, Lng: -122.4194}, ride.Point{Lat: 37.7749, Lng: -122.4194}, ride.RideXL,
			ride.Quote{DistanceMeters: 0, DurationSeconds: 0, Total: 700, Min: 700, Max: 805, Currency: "usd"}),
	)

	DescribeTable("HaversineMeters",
		func(a, b ride.Point, want float64) {
			Expect(ride.HaversineMeters(a, b)).To(BeNumerically("~", want, 0.01))
		},
		Entry("zero", ride.Point{Lat: 10, Lng: 20}, ride.Point{Lat: 10, Lng: 20}, 0.0),
		Entry("1° of latitude", ride.Point{}, ride.Point{Lat: 1}, 111_195.08),
		Entry("1° of longitude at the equator", ride.Point{}, ride.Point{Lng: 1}, 111_195.08),
		Entry("antipodes (π R)", ride.Point{}, ride.Point{Lng: 180}, 20_015_114.44),
		Entry("pole to pole", ride.Point{Lat: 90}, ride.Point{Lat: -90}, 20_015_114.44),
		Entry("San Francisco to Los Angeles", ride.Point{Lat: 37.7749, Lng: -122.4194}, ride.Point{Lat: 34.0522, Lng: -118.2437}, 559_121.35),
	)

	DescribeTable("ride types",
		func(rt ride.RideType, valid bool, multiplier int64) {
			Expect(rt.Valid()).To(Equal(valid))
			Expect(rt.Multiplier()).To(Equal(multiplier))
		},
		Entry("economy", ride.RideEconomy, true, int64(10_000)),
		Entry("comfort", ride.RideComfort, true, int64(13_500)),
		Entry("xl", ride.RideXL, true, int64(17_500)),
		Entry("unknown", ride.RideType("bike"), false, int64(0)),
		Entry("case matters", ride.RideType("XL"), false, int64(0)),
	)

	It("refuses to price an unknown ride type", func() {
		Expect(func() { ride.QuoteDistance(1000, "bike", city) }).To(Panic())
	})

	It("never quotes a range that excludes the price or drops below the minimum", func() {
		for _, rt := range ride.AllRideTypes {
			for meters := int64(0); meters <= 50_000; meters += 737 {
				q := ride.QuoteDistance(meters, rt, city)
				Expect(q.Min).To(BeNumerically("<=", q.Total))
				Expect(q.Max).To(BeNumerically(">=", q.Total))
				Expect(q.Min).To(BeNumerically(">=", city.MinimumFare))
			}
		}
	})

	Describe("ServiceAreaFor", func() {
		sf := ride.ServiceArea{ID: "san-francisco", Center: ride.Point{Lat: 37.7749, Lng: -122.4194}, RadiusMeters: 50_000}
		oakland := ride.ServiceArea{ID: "oakland", Center: ride.Point{Lat: 37.8044, Lng: -122.2712}, RadiusMeters: 30_000}
		la := ride.ServiceArea{ID: "los-angeles", Center: ride.Point{Lat: 34.0522, Lng: -118.2437}, RadiusMeters: 60_000}
		areas := []ride.ServiceArea{sf, oakland, la}

		DescribeTable("finds the nearest area containing the point",
			func(p ride.Point, areas []ride.ServiceArea, want string, found bool) {
				got, ok := ride.ServiceAreaFor(p, areas)
				Expect(ok).To(Equal(found))
				Expect(got.ID).To(Equal(want))
			},
			Entry("inside one", sf.Center, areas, "san-francisco", true),
			// Oakland's center is 13.4 km from San Francisco's, inside both circles.
			Entry("inside two, nearer center wins", oakland.Center, areas, "oakland", true),
			Entry("far south", ride.Point{Lat: 34.1, Lng: -118.3}, areas, "los-angeles", true),
			Entry("in the Pacific", ride.Point{Lat: 30, Lng: -140}, areas, "", false),
			Entry("no areas", sf.Center, nil, "", false),
			Entry("center of a zero-radius area", sf.Center, []ride.ServiceArea{{ID: "dot", Center: sf.Center}}, "dot", true),
			Entry("a tie goes to the earlier area", sf.Center, []ride.ServiceArea{{ID: "a", Center: sf.Center, RadiusMeters: 1}, {ID: "b", Center: sf.Center, RadiusMeters: 1}}, "a", true),
			// 13.4 km away, radius 13 km.
			Entry("just outside", oakland.Center, []ride.ServiceArea{{ID: "small-sf", Center: sf.Center, RadiusMeters: 13_000}}, "", false),
		)
	})
})
