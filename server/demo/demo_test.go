package demo_test

import (
	"math"
	"regexp"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server/demo"
	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/store/storetest"
)

var _ = Describe("Seed", func() {
	for _, e := range engines {
		It("fills an empty database once, keeping the one-active-trip rules, on "+e.name, func(ctx SpecContext) {
			st := e.open(ctx)
			now := time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC)

			seeded, err := demo.Seed(ctx, st, now) // its speed is measured by BenchmarkSeed
			Expect(err).NotTo(HaveOccurred())
			Expect(seeded.Seeded).To(BeTrue())

			count := func(model any, where string, args ...any) int64 {
				n, err := storetest.CountRows(ctx, st, model, where, args...)
				Expect(err).NotTo(HaveOccurred())
				return n
			}
			Expect(count(&store.City{}, "")).To(BeEquivalentTo(4))
			Expect(count(&store.Driver{}, "")).To(BeNumerically(">=", 60))
			Expect(count(&store.Rider{}, "")).To(BeNumerically(">=", 250))
			Expect(count(&store.Trip{}, "")).To(BeNumerically(">=", 5000))
			for _, status := range []string{store.TripStatusAccepted, store.TripStatusArriving,
				store.TripStatusInProgress, store.TripStatusCompleted, store.TripStatusCancelled} {
				Expect(count(&store.Trip{}, "status = ?", status)).To(BeNumerically(">", 0), status)
			}
			Expect(count(&store.Trip{}, "status = ?", store.TripStatusCompleted)).
				To(BeNumerically(">", 4000), "most trips are completed")
			Expect(count(&store.Trip{}, "created_at < ? OR created_at > ?",
				now.Add(-6*7*24*time.Hour), now)).To(BeZero(), "all within the six weeks before now")
			Expect(count(&store.Trip{}, "completed_at > ? OR cancelled_at > ?", now, now)).
				To(BeZero(), "nothing finishes in the future")

			// At most one active trip per driver and per rider; a busy driver is not available.
			perDriver, err := storetest.DriversWithSeveralActiveTrips(ctx, st)
			Expect(err).NotTo(HaveOccurred())
			Expect(perDriver).To(BeEmpty())
			perRider, err := storetest.RidersWithSeveralActiveTrips(ctx, st)
			Expect(err).NotTo(HaveOccurred())
			Expect(perRider).To(BeEmpty())
			Expect(count(&store.Driver{}, "available AND id IN (SELECT driver_id FROM trips WHERE status IN ?)",
				store.ActiveTripStatuses)).To(BeZero())

			// Plausible rows, internal columns filled.
			drivers, err := storetest.Drivers(ctx, st)
			Expect(err).NotTo(HaveOccurred())
			photo := regexp.MustCompile(`^https://cdn\.example\.com/drivers/drv_[a-z2-7]{26}\.jpg$`)
			for _, d := range drivers {
				Expect(d.ID).To(MatchRegexp(`^drv_[a-z2-7]{26}$`))
				Expect(d.Rating).To(BeNumerically(">=", 4.2))
				Expect(d.Rating).To(BeNumerically("<=", 5.0))
				Expect(d.Rating*100).To(BeNumerically("~", math.Round(d.Rating*100), 1e-6), "two decimals")
				Expect(d.Photo).To(MatchRegexp(photo.String()))
				Expect(d.Photo).To(ContainSubstring(d.ID))
				Expect(d.VehiclePlate).NotTo(BeEmpty())
			}
			trips, err := storetest.TripRows(ctx, st, 200)
			Expect(err).NotTo(HaveOccurred())
			for _, t := range trips {
				Expect(t.ID).To(MatchRegexp(`^trp_[a-z2-7]{26}$`))
				Expect(t.FareTotal).To(BeNumerically(">=", 700))
				Expect(t.FareTotal).To(BeNumerically("<", 20000))
				Expect(t.RoutePolyline).NotTo(BeEmpty())
				Expect(t.MatchingScore).To(BeNumerically(">", 0))
				if t.Status == store.TripStatusCompleted {
					Expect(t.DriverPayout).To(Equal(t.FareTotal * 75 / 100))
					Expect(t.CompletedAt).NotTo(BeNil())
				}
			}

			// The demo principals exist and have many trips.
			for column, id := range map[string]string{"rider_id": seeded.RiderID, "driver_id": seeded.DriverID} {
				Expect(count(&store.Trip{}, column+" = ?", id)).To(BeNumerically(">=", 50))
			}
			_, err = st.RiderByID(ctx, seeded.RiderID)
			Expect(err).NotTo(HaveOccurred())
			_, err = st.DriverByID(ctx, seeded.DriverID)
			Expect(err).NotTo(HaveOccurred())

			// Not again.
			again, err := demo.Seed(ctx, st, now.Add(time.Hour))
			Expect(err).NotTo(HaveOccurred())
			Expect(again.Seeded).To(BeFalse())
			Expect(count(&store.Trip{}, "")).To(BeNumerically("<", 6000))
		})

		It("gives the partner account riders of its own, with their trips, on "+e.name, func(ctx SpecContext) {
			st := e.open(ctx)
			seeded, err := demo.Seed(ctx, st, time.Now())
			Expect(err).NotTo(HaveOccurred())
			partner, err := st.RiderByID(ctx, seeded.PartnerRiderID)
			Expect(err).NotTo(HaveOccurred())
			Expect(partner.Account).To(Equal(demo.PartnerAccount))
			own, err := st.RiderByID(ctx, seeded.RiderID)
			Expect(err).NotTo(HaveOccurred())
			Expect(own.Account).To(Equal(store.DefaultAccount))
			for account, rider := range map[string]string{demo.PartnerAccount: partner.ID, store.DefaultAccount: own.ID} {
				page, err := st.ListTrips(ctx, store.TripListParams{Filter: store.TripFilter{Account: account}, Limit: 100})
				Expect(err).NotTo(HaveOccurred())
				Expect(page.Trips).NotTo(BeEmpty())
				for _, t := range page.Trips {
					Expect(t.Account).To(Equal(account))
				}
				mine, err := st.ListTrips(ctx, store.TripListParams{Filter: store.TripFilter{Account: account, RiderID: rider}, Limit: 100})
				Expect(err).NotTo(HaveOccurred())
				Expect(mine.Trips).NotTo(BeEmpty(), "the demo rider of %s has trips there", account)
			}
		})
	}
})
