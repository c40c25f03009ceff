package store_test

import (
	"slices"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/store"
)

var _ = Describe("Open", func() {
	It("refuses URLs of other engines", func(ctx SpecContext) {
		_, err := store.Open(ctx, "mysql://root@localhost/ride")
		Expect(err).To(MatchError(ContainSubstring(`unsupported database URL scheme "mysql"`)))
	})

	It("refuses a sqlite URL without a path", func(ctx SpecContext) {
		_, err := store.Open(ctx, "sqlite://")
		Expect(err).To(HaveOccurred())
	})
})

var _ = Describe("Migrations", func() {
	forEachEngine(func(e *testEngine) {
		It("apply to an empty database and again as a no-op", func(ctx SpecContext) {
			st := e.fresh(ctx)
			Expect(st.Migrate(ctx)).To(Succeed())
			createTrip(ctx, st, tripOpts{})
			Expect(st.Migrate(ctx)).To(Succeed())

			// The second run changed nothing: the data is still there, one version recorded.
			var trips int64
			Expect(st.DB().WithContext(ctx).Model(&store.Trip{}).Count(&trips).Error).To(Succeed())
			Expect(trips).To(BeEquivalentTo(1))
			var versions []int64
			Expect(st.DB().WithContext(ctx).Raw(
				"SELECT version_id FROM goose_db_version WHERE is_applied ORDER BY id").
				Scan(&versions).Error).To(Succeed())
			// Each migration recorded once, in order: a second run re-applied none of them.
			Expect(versions).To(ContainElements(int64(0), int64(1), int64(2)))
			Expect(slices.IsSorted(versions)).To(BeTrue())
			Expect(slices.Compact(slices.Clone(versions))).To(HaveLen(len(versions)))
		})

		It("run concurrently for several stores in one process", func(ctx SpecContext) {
			// Two databases, plus a second handle on the first: goose state is per call, and
			// the same database migrated twice at once must not fail either.
			url1, url2 := e.newDatabase(ctx), e.newDatabase(ctx)
			stores := []*store.Store{openStore(ctx, url1), openStore(ctx, url1), openStore(ctx, url2)}
			var wg sync.WaitGroup
			errs := make([]error, len(stores))
			for i, st := range stores {
				wg.Go(func() { errs[i] = st.Migrate(ctx) })
			}
			wg.Wait()
			for _, err := range errs {
				Expect(err).NotTo(HaveOccurred())
			}
			for _, st := range stores {
				createTrip(ctx, st, tripOpts{})
			}
		})

		It("reports its engine and answers pings", func(ctx SpecContext) {
			Expect(e.shared.Ping(ctx)).To(Succeed())
			if e.name == "SQLite" {
				Expect(e.shared.Engine()).To(Equal(store.EngineSQLite))
			} else {
				Expect(e.shared.Engine()).To(Equal(store.EnginePostgres))
			}
		})
	})
})
