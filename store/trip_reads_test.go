package store_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"gorm.io/gorm"

	"github.com/rideapi/ride/store"
)

var _ = Describe("Reads of single trips", func() {
	for _, e := range engines {
		It(fmt.Sprintf("share statements when they arrive together, each getting its own answer, on %s", e.name), func(ctx SpecContext) {
			st := e.fresh(ctx)
			Expect(st.Migrate(ctx)).To(Succeed())
			trips := make([]store.Trip, 5)
			for i := range trips {
				trips[i] = createTrip(ctx, st, tripOpts{Fare: int64(1000 + i)})
			}

			// Every statement that reads trips is held until release, and its number of
			// ids recorded.
			release := make(chan struct{})
			var mu sync.Mutex
			var statements []int
			Expect(st.TestDB().Callback().Row().Before("gorm:row").Register("test:hold", func(db *gorm.DB) {
				if db.Statement.Table != "trips" {
					return
				}
				mu.Lock()
				statements = append(statements, len(db.Statement.Vars))
				mu.Unlock()
				<-release
			})).To(Succeed())
			held := func() []int {
				mu.Lock()
				defer mu.Unlock()
				return append([]int(nil), statements...)
			}

			// Each trip three times, and two ids that name none.
			var ids []string
			for range 3 {
				ids = append(ids, tripIDs(trips)...)
			}
			ids = append(ids, "trp_missing1", "trp_missing2")
			type answer struct {
				trip store.Trip
				err  error
			}
			// The last reads ask for an existing trip beyond their reach: another account's,
			// driven by someone else.
			ids = append(ids, trips[0].ID, trips[1].ID)
			beyond := len(ids) - 2
			answers := make([]answer, len(ids))
			var wg sync.WaitGroup
			for i, id := range ids {
				reach := store.TripReach{Account: store.DefaultAccount}
				if i >= beyond {
					reach = store.TripReach{Account: "acct_other", DriverID: "drv_other"}
				}
				wg.Go(func() { answers[i].trip, answers[i].err = st.TripWithin(ctx, id, reach) })
			}

			// The first reads take every statement slot, alone; the others wait for the next.
			// (SQLite's one connection runs one of them at a time.)
			Eventually(held).Should(HaveLen(min(store.TripReadStatements, st.Pool().Stats().MaxOpenConnections)))
			Eventually(st.TripReadsWaiting).Should(Equal(len(ids) - store.TripReadStatements))
			close(release)
			wg.Wait()

			for i, id := range ids {
				if id == "trp_missing1" || id == "trp_missing2" || i >= beyond {
					Expect(answers[i].err).To(MatchError(store.ErrNotFound), id)
					continue
				}
				Expect(answers[i].err).NotTo(HaveOccurred(), id)
				Expect(answers[i].trip.ID).To(Equal(id))
				want := trips[i%len(trips)]
				Expect(answers[i].trip.FareTotal).To(Equal(want.FareTotal))
				Expect(answers[i].trip.Driver.ID).To(Equal(want.DriverID))
				Expect(answers[i].trip.Driver.Name).To(Equal("Test Driver"))
			}
			// One read in each of the statements that were held, then one statement for all
			// the reads that waited; a read is three values (the id and the reach's account
			// and driver).
			want := make([]int, store.TripReadStatements, store.TripReadStatements+1)
			for i := range want {
				want[i] = 3
			}
			Expect(held()).To(Equal(append(want, 3*(len(ids)-store.TripReadStatements))))

			// Alone again, a read runs at once.
			got, err := st.TripWithin(ctx, trips[0].ID, store.TripReach{Account: store.DefaultAccount})
			Expect(err).NotTo(HaveOccurred())
			Expect(got.ID).To(Equal(trips[0].ID))
			Expect(st.TripReadsWaiting()).To(BeZero())
		})

		It(fmt.Sprintf("wait for a statement no longer than their callers do, on %s", e.name), func(ctx SpecContext) {
			st := e.fresh(ctx)
			Expect(st.Migrate(ctx)).To(Succeed())
			trip := createTrip(ctx, st, tripOpts{})
			release := make(chan struct{})
			var holding sync.WaitGroup
			Expect(st.TestDB().Callback().Row().Before("gorm:row").Register("test:hold", func(db *gorm.DB) {
				if db.Statement.Table == "trips" {
					<-release
				}
			})).To(Succeed())
			for range store.TripReadStatements {
				holding.Go(func() {
					_, err := st.TripWithin(ctx, trip.ID, store.TripReach{Account: store.DefaultAccount})
					Expect(err).NotTo(HaveOccurred())
				})
			}
			Eventually(st.TripReadsRunning).Should(Equal(store.TripReadStatements))

			// Every statement slot is held, as by a database that stopped answering: reads
			// behind them give up at their deadline, the statements still held.
			for range 3 {
				bounded, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
				_, err := st.TripWithin(bounded, trip.ID, store.TripReach{Account: store.DefaultAccount})
				cancel()
				Expect(err).To(MatchError(context.DeadlineExceeded))
			}
			Expect(st.TripReadsWaiting()).To(BeZero(), "the reads that gave up left the queue")
			close(release)
			holding.Wait()
			got, err := st.TripWithin(ctx, trip.ID, store.TripReach{Account: store.DefaultAccount})
			Expect(err).NotTo(HaveOccurred())
			Expect(got.ID).To(Equal(trip.ID))
		})
	}
})
