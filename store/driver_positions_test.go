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
	})
})

func driverPosition(ctx context.Context, st *store.Store, id string) store.DriverPosition {
	GinkgoHelper()
	d, err := st.DriverByID(ctx, id)
	Expect(err).NotTo(HaveOccurred())
	Expect(d.Position()).NotTo(BeNil())
	return *d.Position()
}
