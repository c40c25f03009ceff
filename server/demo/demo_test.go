package demo_test

import (
	"math"
	"regexp"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"gorm.io/gorm"

	"github.com/rideapi/ride/server/demo"
	"github.com/rideapi/ride/store"
)

var _ = Describe("Seed", func() {
	for _, e := range engines {
		It("fills an empty database once, keeping the one-active-trip rules, on "+e.name, func(ctx SpecContext) {
			st := e.open(ctx)
			now := time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC)

			seeded, err := demo.Seed(ctx, st, now) // its speed is measured by BenchmarkSeed
			Expect(err).NotTo(HaveOccurred())
			Expect(seeded.Seeded).To(BeTrue())

			db := st.DB().WithContext(ctx)
			count := func(q *gorm.DB) int64 {
				var n int64
				Expect(q.Count(&n).Error).To(Succeed())
				return n
			}
			Expect(count(db.Model(&store.City{}))).To(BeEquivalentTo(4))
			Expect(count(db.Model(&store.Driver{}))).To(BeNumerically(">=", 60))
			Expect(count(db.Model(&store.Rider{}))).To(BeNumerically(">=", 250))
			Expect(count(db.Model(&store.Trip{}))).To(BeNumerically(">=", 5000))
			for _, status := range []string{store.TripStatusAccepted, store.TripStatusArriving,
				store.TripStatusInProgress, store.TripStatusCompleted, store.TripStatusCancelled} {
				Expect(count(db.Model(&store.Trip{}).Where("status = ?", status))).To(BeNumerically(">", 0), status)
			}
			Expect(count(db.Model(&store.Trip{}).Where("status = ?", store.TripStatusCompleted))).
				To(BeNumerically(">", 4000), "most trips are completed")
			Expect(count(db.Model(&store.Trip{}).Where("created_at < ? OR created_at > ?",
				now.Add(-6*7*24*time.Hour), now))).To(BeZero(), "all within the six weeks before now")
			Expect(count(db.Model(&store.Trip{}).Where("completed_at > ? OR cancelled_at > ?", now, now))).
				To(BeZero(), "nothing finishes in the future")

			// At most one active trip per driver and per rider; a busy driver is not available.
			type group struct {
				Owner string
				N     int
			}
			active := db.Model(&store.Trip{}).Where("status IN ?", store.ActiveTripStatuses)
			var perDriver, perRider []group
			Expect(active.Session(&gorm.Session{}).Select("driver_id AS owner, COUNT(*) AS n").
				Group("driver_id").Having("COUNT(*) > 1").Scan(&perDriver).Error).To(Succeed())
			Expect(perDriver).To(BeEmpty())
			Expect(active.Session(&gorm.Session{}).Select("rider_id AS owner, COUNT(*) AS n").
				Group("rider_id").Having("COUNT(*) > 1").Scan(&perRider).Error).To(Succeed())
			Expect(perRider).To(BeEmpty())
			Expect(count(db.Model(&store.Driver{}).Where("available").
				Where("id IN (?)", active.Session(&gorm.Session{}).Select("driver_id")))).To(BeZero())

			// Plausible rows, internal columns filled.
			var drivers []store.Driver
			Expect(db.Find(&drivers).Error).To(Succeed())
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
			var trips []store.Trip
			Expect(db.Limit(200).Find(&trips).Error).To(Succeed())
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
			for _, f := range []store.TripFilter{{RiderID: seeded.RiderID}, {DriverID: seeded.DriverID}} {
				Expect(count(db.Model(&store.Trip{}).Where(&store.Trip{RiderID: f.RiderID, DriverID: f.DriverID}))).
					To(BeNumerically(">=", 50))
			}
			_, err = st.RiderByID(ctx, seeded.RiderID)
			Expect(err).NotTo(HaveOccurred())
			_, err = st.DriverByID(ctx, seeded.DriverID)
			Expect(err).NotTo(HaveOccurred())

			// Not again.
			again, err := demo.Seed(ctx, st, now.Add(time.Hour))
			Expect(err).NotTo(HaveOccurred())
			Expect(again.Seeded).To(BeFalse())
			Expect(count(db.Model(&store.Trip{}))).To(BeNumerically("<", 6000))
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
