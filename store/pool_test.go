package store_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

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
			var inside atomic.Int32
			for range pool.PoolSize() + 3 {
				wg.Go(func() {
					defer GinkgoRecover()
					Expect(st.WithTx(ctx, func(tx *store.Store) error {
						inside.Add(1)
						<-release // holds its connection, so that the others wait for one
						return tx.Ping(ctx)
					})).To(Succeed())
				})
			}
			Eventually(inside.Load).Should(BeNumerically("==", pool.PoolSize()))
			Consistently(inside.Load).WithTimeout(100*time.Millisecond).Should(BeNumerically("==", pool.PoolSize()),
				"transactions past the pool wait for it")
			Expect(st.Pool().Stats().OpenConnections).To(Equal(pool.PoolSize()))
			close(release)
			wg.Wait()
			stats := st.Pool().Stats()
			Expect(stats.OpenConnections).To(BeNumerically("<=", pool.PoolSize()))
			Expect(stats.Idle).To(BeNumerically("<=", 1))
		})
	}

	for _, e := range engines {
		It("answers a statement that finds no connection free within its bound unavailable, and then serves as before on "+e.name, SpecTimeout(time.Minute), func(ctx SpecContext) {
			pool := store.Pool{MaxConns: store.MinPoolConns + 1, MaxIdleConns: 1}
			st := openStore(ctx, e.newDatabase(ctx), store.WithPool(pool))
			Expect(st.Migrate(ctx)).To(Succeed())
			size := st.Pool().Stats().MaxOpenConnections // 2 on PostgreSQL, SQLite's one
			held, release := make(chan struct{}), make(chan struct{})
			var wg sync.WaitGroup
			for range size {
				wg.Go(func() {
					defer GinkgoRecover()
					Expect(st.WithTx(ctx, func(tx *store.Store) error {
						held <- struct{}{}
						<-release
						return nil
					})).To(Succeed())
				})
			}
			for range size {
				<-held
			}

			By("every connection held: statements bounded by a deadline give up at it, cancelled ones when cancelled")
			for range 3 * size {
				_, err := st.Cities(store.WithDeadline(ctx, time.Now().Add(20*time.Millisecond)))
				Expect(err).To(HaveOccurred())
				Expect(store.Unavailable(err)).To(BeTrue(), "%v", err)
				Expect(st.WithTx(store.WithDeadline(ctx, time.Now().Add(20*time.Millisecond)), func(*store.Store) error { return nil })).
					To(Satisfy(store.Unavailable))
			}
			cancelled, cancel := context.WithCancel(ctx)
			cancel()
			_, err := st.Cities(cancelled)
			Expect(errors.Is(err, context.Canceled)).To(BeTrue(), "%v", err)

			By("the connections free again: no turn was lost to the statements that gave up")
			close(release)
			wg.Wait()
			for range 2 * size {
				wg.Go(func() {
					defer GinkgoRecover()
					Expect(st.WithTx(ctx, func(tx *store.Store) error {
						_, err := tx.Cities(ctx)
						return err
					})).To(Succeed())
				})
			}
			wg.Wait()
			_, err = st.Cities(store.WithDeadline(ctx, time.Now().Add(time.Minute)))
			Expect(err).NotTo(HaveOccurred())
		})
	}
})
