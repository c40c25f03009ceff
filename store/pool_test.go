package store_test

import (
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/store"
)

var _ = Describe("The connections a store opens", func() {
	It("refuses a pool too small for the connections beside it, or idle connections it cannot hold", func(ctx SpecContext) {
		_, err := store.Open(ctx, "sqlite://"+GinkgoT().TempDir()+"/x.db", store.WithPool(store.Pool{MaxConns: store.MinPoolConns - 1}))
		Expect(err).To(MatchError(ContainSubstring("too small")))
		_, err = store.Open(ctx, "sqlite://"+GinkgoT().TempDir()+"/y.db", store.WithPool(store.Pool{MaxConns: 8, MaxIdleConns: 5}))
		Expect(err).To(MatchError(ContainSubstring("idle")))
	})

	for _, e := range engines {
		if e.name != "PostgreSQL" {
			continue
		}
		It("holds at most MaxConns on "+e.name+", the pool MaxConns less the 4 beside it, however many wait", func(ctx SpecContext) {
			pool := store.Pool{MaxConns: 7, MaxIdleConns: 1}
			st := openStore(ctx, e.newDatabase(ctx), store.WithPool(pool))
			Expect(st.Migrate(ctx)).To(Succeed())
			Expect(st.Pool().Stats().MaxOpenConnections).To(Equal(pool.PoolSize()))
			release := make(chan struct{})
			var wg sync.WaitGroup
			for range pool.PoolSize() + 3 {
				wg.Go(func() {
					defer GinkgoRecover()
					Expect(st.WithTx(ctx, func(tx *store.Store) error {
						<-release // holds its connection, so that the others wait for one
						return tx.Ping(ctx)
					})).To(Succeed())
				})
			}
			Eventually(func() int64 { return st.Pool().Stats().WaitCount }).Should(BeNumerically(">", 0), "transactions past the pool wait for it")
			Expect(st.Pool().Stats().OpenConnections).To(Equal(pool.PoolSize()))
			close(release)
			wg.Wait()
			stats := st.Pool().Stats()
			Expect(stats.OpenConnections).To(BeNumerically("<=", pool.PoolSize()))
			Expect(stats.Idle).To(BeNumerically("<=", 1))
		})
	}
})
