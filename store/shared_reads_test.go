package store_test

import (
	"context"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/store"
)

var _ = Describe("Identical trip reads", func() {
	for _, e := range engines {
		if e.name != "PostgreSQL" {
			continue // only the pool's reads through pgx share statements
		}
		It("share the statement after the one under way, which sees every write committed before they asked, on "+e.name, SpecTimeout(time.Minute), func(ctx SpecContext) {
			st := e.fresh(ctx)
			Expect(st.Migrate(ctx)).To(Succeed())
			driver := createDriver(ctx, st, driverOpts{})
			base := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
			first := createTrip(ctx, st, tripOpts{DriverID: driver.ID, CreatedAt: base})
			// The fleet is shared: the same driver drove a trip of another account.
			other := createTrip(ctx, st, tripOpts{DriverID: driver.ID, CreatedAt: base.Add(-time.Minute)})
			const partner = "acct_partner"
			Expect(st.TestDB().Exec(`UPDATE trips SET account = ? WHERE id = ?`, partner, other.ID).Error).To(Succeed())
			pageOf := func(account string) store.TripListParams {
				return store.TripListParams{Filter: store.TripFilter{Account: account, DriverID: driver.ID}, Limit: 10}
			}
			mine := pageOf(first.Account)

			held, release, statements, restore := holdFirstSharedStatement()
			type answer struct {
				page store.TripPage
				err  error
			}
			list := func(ctx context.Context, p store.TripListParams) <-chan answer {
				out := make(chan answer, 1)
				go func() {
					page, err := st.ListTrips(ctx, p)
					out <- answer{page, err}
				}()
				return out
			}
			ids := func(a answer) []string {
				Expect(a.err).NotTo(HaveOccurred())
				return tripIDs(a.page.Trips)
			}

			under := list(ctx, mine)
			Eventually(held).Should(BeClosed())
			// Committed after that statement read its rows, before the next reads ask.
			second := createTrip(ctx, st, tripOpts{DriverID: driver.ID, CreatedAt: base.Add(time.Minute)})

			// Three identical reads wait for the next statement. One caller goes away, and
			// another's bound passes: neither waits any longer.
			gone, leave := context.WithCancel(ctx)
			left := list(gone, mine)
			late := list(store.WithDeadline(ctx, time.Now().Add(50*time.Millisecond)), mine)
			waiting := []<-chan answer{list(ctx, mine), list(ctx, mine)}
			Eventually(store.SharedReadsWaiting).Should(Equal(4))
			leave()
			Expect((<-left).err).To(MatchError(context.Canceled))
			Expect((<-late).err).To(MatchError(context.DeadlineExceeded))
			Expect(store.SharedReadsWaiting()).To(Equal(2))

			// Another account asking for the same driver's trips shares nothing: its statement
			// differs in the account, and runs at once with only that account's trip.
			otherPage, err := st.ListTrips(ctx, pageOf(partner))
			Expect(err).NotTo(HaveOccurred())
			Expect(tripIDs(otherPage.Trips)).To(Equal([]string{other.ID}))
			Expect(store.SharedReadsWaiting()).To(Equal(2))

			close(release)
			Expect(ids(<-under)).To(Equal([]string{first.ID}))
			a, b := <-waiting[0], <-waiting[1]
			Expect(ids(a)).To(Equal([]string{second.ID, first.ID}))
			Expect(ids(b)).To(Equal([]string{second.ID, first.ID}))
			restore()
			// The one under way, the other account's, and one for the reads that waited.
			Expect(statements.Load()).To(Equal(int32(3)))

			// Each read has trips of its own.
			a.page.Trips[0].Status = store.TripStatusCancelled
			Expect(b.page.Trips[0].Status).To(Equal(store.TripStatusCompleted))
		})

		It("give every read of a shared backward page its page in list order, however its leader's caller turns its own, on "+e.name, SpecTimeout(time.Minute), func(ctx SpecContext) {
			st := e.fresh(ctx)
			Expect(st.Migrate(ctx)).To(Succeed())
			driver := createDriver(ctx, st, driverOpts{})
			base := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
			var trips []store.Trip // oldest first
			for i := range 5 {
				trips = append(trips, createTrip(ctx, st, tripOpts{DriverID: driver.ID, CreatedAt: base.Add(time.Duration(i) * time.Minute)}))
			}
			// Newest first, the two trips before trips[1] in list order are trips[3] and
			// trips[2]: a backward page reads them in reverse and turns them round in place.
			before := trips[1].Keyset(nil)
			p := store.TripListParams{Filter: store.TripFilter{Account: trips[0].Account, DriverID: driver.ID}, Before: &before, Limit: 2}
			want := []string{trips[3].ID, trips[2].ID}

			held, release, statements, restore := holdFirstSharedStatement()
			readers := store.DefaultPool.PoolSize() + 2 // waiting readers lend their turns
			pages := make(chan []string, readers+1)
			read := func() {
				defer GinkgoRecover()
				page, err := st.ListTrips(ctx, p)
				Expect(err).NotTo(HaveOccurred())
				pages <- tripIDs(page.Trips)
			}
			go read()
			Eventually(held).Should(BeClosed())
			for range readers {
				go read()
			}
			Eventually(store.SharedReadsWaiting).Should(Equal(readers))
			close(release)
			for range readers + 1 {
				Expect(<-pages).To(Equal(want))
			}
			restore()
			Expect(statements.Load()).To(Equal(int32(2)))
		})
	}
})

// holdFirstSharedStatement holds the first statement identical reads could share once it has
// read its rows (held closes), until release is closed, and counts every statement; restore
// stops holding and counting.
func holdFirstSharedStatement() (held, release chan struct{}, statements *atomic.Int32, restore func()) {
	held, release, statements = make(chan struct{}), make(chan struct{}), new(atomic.Int32)
	restore = store.HoldSharedReads(func() {
		if statements.Add(1) == 1 {
			close(held)
			<-release
		}
	})
	return held, release, statements, restore
}
