package store_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/store"
)

var _ = Describe("Driver positions", func() {
	forEachEngine(func(e *testEngine) {
		var st *store.Store
		BeforeEach(func() { st = e.shared })

		It("report every online driver's position again in place, and leave offline drivers alone", func(ctx SpecContext) {
			online := createDriver(ctx, st, driverOpts{})
			offline := createDriver(ctx, st, driverOpts{City: online.City})
			_, err := st.SetDriverOnline(ctx, offline.ID, false, time.Now())
			Expect(err).NotTo(HaveOccurred())
			later := time.Now().Add(time.Second)
			n, err := st.ReportPositionsInPlace(ctx, later)
			Expect(err).NotTo(HaveOccurred())
			Expect(n).To(BeNumerically(">=", 1))

			refreshed := driverPosition(ctx, st, online.ID)
			Expect(refreshed.RecordedAt).To(BeTemporally("~", later, time.Millisecond))
			Expect(refreshed.Lat).To(Equal(online.Lat), "in place: only the time moves")
			Expect(driverPosition(ctx, st, offline.ID).RecordedAt).To(BeTemporally("~", *offline.PositionAt, time.Millisecond))
		})

		It("come with an active trip's driver, and not with a final trip's", func(ctx SpecContext) {
			d := createDriver(ctx, st, driverOpts{})
			active := createTrip(ctx, st, tripOpts{DriverID: d.ID, Status: store.TripStatusArriving})
			final := createTrip(ctx, st, tripOpts{DriverID: d.ID, Status: store.TripStatusCompleted})
			reads := map[string]func(id string) (store.Trip, error){
				"by id": func(id string) (store.Trip, error) { return st.TripByID(ctx, id) },
				"within reach": func(id string) (store.Trip, error) {
					return st.TripWithin(ctx, id, store.TripReach{Account: store.DefaultAccount})
				},
				"in a transaction": func(id string) (t store.Trip, err error) {
					err = st.WithTx(ctx, func(tx *store.Store) error { t, err = tx.TripByID(ctx, id); return err })
					return t, err
				},
				"several by id": func(id string) (store.Trip, error) {
					trips, err := st.TripsWithin(ctx, []string{active.ID, final.ID}, store.TripReach{Account: store.DefaultAccount})
					return tripNamed(trips, id), err
				},
				"in a list": func(id string) (store.Trip, error) {
					page, err := st.ListTrips(ctx, store.TripListParams{Filter: store.TripFilter{Account: store.DefaultAccount, DriverID: d.ID}, Limit: 10})
					return tripNamed(page.Trips, id), err
				},
			}
			for name, read := range reads {
				got, err := read(active.ID)
				Expect(err).NotTo(HaveOccurred())
				Expect(got.Driver.Position).NotTo(BeNil(), name)
				Expect(got.Driver.Position.Lat).To(Equal(d.Lat), name)
				Expect(got.Driver.Position.RecordedAt).To(BeTemporally("~", *d.PositionAt, time.Millisecond), name)
				got, err = read(final.ID)
				Expect(err).NotTo(HaveOccurred())
				Expect(got.Driver.Position).To(BeNil(), name)
				Expect(got.Driver.Name).To(Equal(d.Name), name)
			}
		})
	})
})

func driverPosition(ctx context.Context, st *store.Store, id string) store.DriverPosition {
	GinkgoHelper()
	d, err := st.DriverByID(ctx, id)
	Expect(err).NotTo(HaveOccurred())
	Expect(d.Position()).NotTo(BeNil())
	return *d.Position()
}

// tripNamed is the trip of trips with id, or the zero trip.
func tripNamed(trips []store.Trip, id string) store.Trip {
	for _, t := range trips {
		if t.ID == id {
			return t
		}
	}
	return store.Trip{}
}
