package store_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

var _ = Describe("Cities around a latitude", func() {
	forEachEngine(func(e *testEngine) {
		var st *store.Store
		BeforeEach(func() { st = e.shared })
		// The great-circle length of a degree along a meridian, as the fares measure it.
		metersPerDegree := ride.HaversineMeters(ride.Point{Lat: 0, Lng: 0}, ride.Point{Lat: 1, Lng: 0})

		areasOf := func(cs []store.City) []ride.ServiceArea {
			areas := make([]ride.ServiceArea, len(cs))
			for i, c := range cs {
				areas[i] = ride.ServiceArea{ID: c.ID, Center: ride.Point{Lat: c.CenterLat, Lng: c.CenterLng}, RadiusMeters: int64(c.RadiusMeters)}
			}
			return areas
		}
		around := func(ctx SpecContext, lat float64) []store.City {
			cs, err := st.CitiesAround(ctx, lat)
			Expect(err).NotTo(HaveOccurred())
			return cs
		}

		It("hold every city whose area contains the point, so the serving city is the one all cities give", func(ctx SpecContext) {
			// Overlapping areas of every size along a band of latitudes, some near the poles
			// where a degree of longitude is short.
			rng := rand.New(rand.NewPCG(7, 11))
			var all []store.City
			for i := range 40 {
				lat := -89.0 + 178*rng.Float64()
				if i%4 == 0 {
					lat = 40 + rng.Float64() // a crowded band
				}
				c, err := st.CreateCity(ctx, store.City{
					ID: fmt.Sprintf("band-%02d", i), Name: "Band", CenterLat: lat, CenterLng: -180 + 360*rng.Float64(),
					RadiusMeters: 2_000 + rng.IntN(200_000), Currency: "usd", BaseFare: 250, PerKm: 130, PerMinute: 35, MinimumFare: 800,
				})
				Expect(err).NotTo(HaveOccurred())
				all = append(all, c)
			}
			served := 0
			for range 400 {
				c := all[rng.IntN(len(all))]
				// A point in or near the city's area: up to one and a half radii from its center.
				reach := 1.5 * float64(c.RadiusMeters) / metersPerDegree
				p := ride.Point{Lat: c.CenterLat + reach*(2*rng.Float64()-1), Lng: c.CenterLng + reach*(2*rng.Float64()-1)}
				p.Lat = min(max(p.Lat, -90), 90)
				got := around(ctx, p.Lat)
				for _, g := range got {
					Expect(all).To(ContainElement(g), "every column of a city read back as stored")
				}
				Expect(slices.IsSortedFunc(got, func(a, b store.City) int { return strings.Compare(a.ID, b.ID) })).To(BeTrue())
				for _, a := range areasOf(all) {
					if ride.InServiceArea(p, a) {
						Expect(got).To(ContainElement(HaveField("ID", a.ID)), "point %v in %s", p, a.ID)
					}
				}
				want, wantOK := ride.ServiceAreaFor(p, areasOf(all))
				have, haveOK := ride.ServiceAreaFor(p, areasOf(got))
				Expect(haveOK).To(Equal(wantOK))
				Expect(have).To(Equal(want))
				if wantOK {
					served++
				}
			}
			Expect(served).To(BeNumerically(">", 100), "most points lie in an area")
		})

		It("keep a city for a point on its rim due north, and leave it out a kilometre beyond", func(ctx SpecContext) {
			c := createCity(ctx, st, cityOpts{})
			rim := c.CenterLat + float64(c.RadiusMeters)/metersPerDegree
			Expect(around(ctx, rim)).To(ConsistOf(HaveField("ID", c.ID)))
			Expect(around(ctx, c.CenterLat-float64(c.RadiusMeters)/metersPerDegree)).To(ConsistOf(HaveField("ID", c.ID)))
			Expect(around(ctx, rim+1_000/metersPerDegree)).To(BeEmpty())
			Expect(around(ctx, c.CenterLat+45)).To(BeEmpty())
		})

		It("keep a city of the largest radius the schema allows, on both engines", func(ctx SpecContext) {
			c, err := st.CreateCity(ctx, store.City{ID: "everywhere", Name: "Everywhere", CenterLat: 0, CenterLng: 0,
				RadiusMeters: math.MaxInt32, Currency: "usd", BaseFare: 250, PerKm: 130, PerMinute: 35, MinimumFare: 800})
			Expect(err).NotTo(HaveOccurred())
			Expect(around(ctx, 89.9)).To(ConsistOf(HaveField("ID", c.ID)))
		})
	})
})
