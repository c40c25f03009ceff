package store_test

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/store"
)

var _ = Describe("Lookups of the GraphQL endpoint", func() {
	forEachEngine(func(e *testEngine) {
		var st *store.Store
		BeforeEach(func() { st = e.shared })

		It("load several trips with their drivers, and several drivers, in one call each", func(ctx SpecContext) {
			a := createTrip(ctx, st, tripOpts{Fare: 1200})
			b := createTrip(ctx, st, tripOpts{Fare: 3400})
			reach := store.TripReach{Account: store.DefaultAccount}
			trips, err := st.TripsWithin(ctx, []string{a.ID, b.ID, "trp_missing"}, reach)
			Expect(err).NotTo(HaveOccurred())
			Expect(tripIDs(trips)).To(ConsistOf(a.ID, b.ID))
			for _, t := range trips {
				Expect(t.Driver.ID).To(Equal(t.DriverID))
				Expect(t.Driver.Name).To(Equal("Test Driver"))
			}

			drivers, err := st.DriversByIDs(ctx, []string{a.DriverID, b.DriverID, "drv_missing"})
			Expect(err).NotTo(HaveOccurred())
			Expect(drivers).To(HaveLen(2))

			one, err := st.TripsWithin(ctx, []string{b.ID}, reach)
			Expect(err).NotTo(HaveOccurred())
			Expect(one).To(HaveLen(1))
			Expect(one[0].ID).To(Equal(b.ID))
			Expect(one[0].Driver.Name).To(Equal("Test Driver"))
			missing, err := st.TripsWithin(ctx, []string{"trp_missing"}, reach)
			Expect(err).NotTo(HaveOccurred())
			Expect(missing).To(BeEmpty())

			none, err := st.TripsWithin(ctx, nil, reach)
			Expect(err).NotTo(HaveOccurred())
			Expect(none).To(BeEmpty())

			// Beyond reach, a trip is absent as a missing one is; its driver reaches it.
			for _, ids := range [][]string{{a.ID}, {a.ID, b.ID}} {
				other, err := st.TripsWithin(ctx, ids, store.TripReach{Account: "acct_other"})
				Expect(err).NotTo(HaveOccurred())
				Expect(other).To(BeEmpty())
				driven, err := st.TripsWithin(ctx, ids, store.TripReach{Account: "acct_other", DriverID: a.DriverID})
				Expect(err).NotTo(HaveOccurred())
				Expect(tripIDs(driven)).To(Equal([]string{a.ID}))
			}
		})

		It("register, renew, serve and expire persisted queries", func(ctx SpecContext) {
			text := "{ trip(id: \"trp_" + randomHex(8) + "\") { status } }"
			sum := sha256.Sum256([]byte(text))
			hash := hex.EncodeToString(sum[:])
			old := time.Now().Add(-48 * time.Hour)

			const account, other = "acct_registers", "acct_other"

			Expect(st.SavePersistedQuery(ctx, store.PersistedQuery{Account: account, Hash: hash, Query: text, CreatedAt: old})).To(Succeed())
			got, err := st.PersistedQueryByHash(ctx, account, hash, old.Add(-time.Hour))
			Expect(err).NotTo(HaveOccurred())
			Expect(got.Query).To(Equal(text))
			_, err = st.PersistedQueryByHash(ctx, other, hash, old.Add(-time.Hour))
			Expect(err).To(MatchError(store.ErrNotFound), "registered for one account only")
			_, err = st.PersistedQueryByHash(ctx, account, hash, time.Now().Add(-time.Hour))
			Expect(err).To(MatchError(store.ErrNotFound), "older than the retention: not served")

			renewed := time.Now()
			Expect(st.SavePersistedQuery(ctx, store.PersistedQuery{Account: account, Hash: hash, Query: text, CreatedAt: renewed})).To(Succeed())
			got, err = st.PersistedQueryByHash(ctx, account, hash, time.Now().Add(-time.Hour))
			Expect(err).NotTo(HaveOccurred())
			Expect(got.CreatedAt).To(BeTemporally("~", renewed, time.Millisecond))

			n, err := st.DeletePersistedQueriesBefore(ctx, renewed.Add(time.Second))
			Expect(err).NotTo(HaveOccurred())
			Expect(n).To(BeNumerically(">=", 1))
			_, err = st.PersistedQueryByHash(ctx, account, hash, old)
			Expect(err).To(MatchError(store.ErrNotFound))
		})

		It("refuse a hash that is not lowercase hex SHA-256", func(ctx SpecContext) {
			err := st.SavePersistedQuery(ctx, store.PersistedQuery{Account: "acct_registers", Hash: "NOT-A-HASH", Query: "{ x }", CreatedAt: time.Now()})
			Expect(err).To(HaveOccurred())
		})
	})
})
