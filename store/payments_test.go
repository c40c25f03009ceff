package store_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/store"
)

var _ = Describe("Payments and receipts", func() {
	forEachEngine(func(e *testEngine) {
		payment := func(tripID, status string) store.Payment {
			p := store.Payment{ID: newID("pay_"), TripID: tripID, Amount: 1850, Currency: "usd", Status: status,
				PaymentMethod: "pm_card_visa", CreatedAt: time.Now()}
			if status == store.PaymentFailed {
				code := "card_declined"
				p.FailureCode = &code
			}
			return p
		}

		It("allows many failed payments but one succeeded payment per trip", func(ctx SpecContext) {
			trip := createTrip(ctx, e.shared, tripOpts{})
			for range 2 {
				_, err := e.shared.CreatePayment(ctx, payment(trip.ID, store.PaymentFailed))
				Expect(err).NotTo(HaveOccurred())
			}
			_, err := e.shared.SucceededPaymentForTrip(ctx, trip.ID)
			Expect(err).To(MatchError(store.ErrNotFound))
			Expect(e.shared.TripPaid(ctx, trip.ID)).To(BeFalse())
			paid, err := e.shared.CreatePayment(ctx, payment(trip.ID, store.PaymentSucceeded))
			Expect(err).NotTo(HaveOccurred())
			_, err = e.shared.CreatePayment(ctx, payment(trip.ID, store.PaymentSucceeded))
			Expect(err).To(MatchError(store.ErrDuplicate))
			// Refused inside a transaction, the transaction goes on (PostgreSQL aborts one
			// whose statement failed) and can record a failed attempt.
			Expect(e.shared.WithTx(ctx, func(tx *store.Store) error {
				if _, err := tx.CreatePayment(ctx, payment(trip.ID, store.PaymentSucceeded)); !errors.Is(err, store.ErrDuplicate) {
					return fmt.Errorf("want ErrDuplicate, got %v", err)
				}
				_, err := tx.CreatePayment(ctx, payment(trip.ID, store.PaymentFailed))
				return err
			})).To(Succeed())

			Expect(e.shared.TripPaid(ctx, trip.ID)).To(BeTrue())
			got, err := e.shared.SucceededPaymentForTrip(ctx, trip.ID)
			Expect(err).NotTo(HaveOccurred())
			Expect(got.ID).To(Equal(paid.ID))
			Expect(got.PaymentMethod).To(Equal("pm_card_visa"))
			all, err := e.shared.PaymentsForTrip(ctx, trip.ID)
			Expect(err).NotTo(HaveOccurred())
			Expect(all).To(HaveLen(4))
		})

		It("lets only one of two concurrent transactions pay a trip", func(ctx SpecContext) {
			trip := createTrip(ctx, e.shared, tripOpts{})
			// On PostgreSQL both transactions are open, each having read the trip, before either
			// locks it: they overlap for certain. SQLite runs one transaction at a time (one
			// connection), so there the second begins after the first ends.
			began, proceed := make(chan struct{}, 2), make(chan struct{})
			overlap := e.name == "PostgreSQL"
			if !overlap {
				close(proceed)
			}
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i := range errs {
				wg.Go(func() {
					defer GinkgoRecover() // the Expect below runs off the spec's goroutine
					errs[i] = e.shared.WithTx(ctx, func(tx *store.Store) error {
						if _, err := tx.TripByID(ctx, trip.ID); err != nil {
							return err
						}
						began <- struct{}{}
						<-proceed
						locked, err := tx.LockTripForPayment(ctx, trip.Account, trip.ID)
						if err != nil {
							return err
						}
						Expect(locked.FareTotal).To(Equal(trip.FareTotal))
						if paid, err := tx.TripPaid(ctx, trip.ID); err != nil || paid {
							return cmp.Or(err, store.ErrDuplicate)
						}
						_, err = tx.CreatePayment(ctx, payment(trip.ID, store.PaymentSucceeded))
						return err
					})
				})
			}
			if overlap {
				<-began
				<-began
				close(proceed)
			}
			wg.Wait()
			Expect(errs).To(ContainElement(BeNil()))
			Expect(errs).To(ContainElement(MatchError(store.ErrDuplicate)))
		})

		It("locks a trip for payment and reads what the payment needs: its fare, its route and its city's rates", func(ctx SpecContext) {
			trip := createTrip(ctx, e.shared, tripOpts{})
			city, err := e.shared.CityByID(ctx, trip.City)
			Expect(err).NotTo(HaveOccurred())
			Expect(e.shared.WithTx(ctx, func(tx *store.Store) error {
				locked, err := tx.LockTripForPayment(ctx, trip.Account, trip.ID)
				Expect(err).NotTo(HaveOccurred())
				Expect(locked).To(Equal(store.PayableTrip{ID: trip.ID, Account: trip.Account, Status: trip.Status,
					RiderID: trip.RiderID, FareTotal: trip.FareTotal, FareCurrency: trip.FareCurrency,
					PickupLat: trip.PickupLat, PickupLng: trip.PickupLng, DropoffLat: trip.DropoffLat, DropoffLng: trip.DropoffLng,
					Rates: store.CityRates{Currency: city.Currency, BaseFare: city.BaseFare,
						PerKm: city.PerKm, PerMinute: city.PerMinute, MinimumFare: city.MinimumFare}}))
				Expect(locked.Rates.BaseFare).NotTo(BeZero())
				return nil
			})).To(Succeed())
		})

		It("never lets another account's payment lock a trip, nor wait for its lock", func(ctx SpecContext) {
			if e.name != "PostgreSQL" {
				Skip("SQLite runs one writing transaction at a time: every other one waits for it, whatever it reads")
			}
			trip := createTrip(ctx, e.shared, tripOpts{})
			locked, release := make(chan struct{}), make(chan struct{})
			owner := make(chan error, 1)
			go func() {
				owner <- e.shared.WithTx(ctx, func(tx *store.Store) error {
					if _, err := tx.LockTripForPayment(ctx, trip.Account, trip.ID); err != nil {
						return err
					}
					close(locked)
					<-release
					return nil
				})
			}()
			<-locked
			// Were the stranger's read to reach the row, it would wait for the owner's
			// transaction, which ends only after this answer: the bound would end it instead.
			bounded, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			Expect(e.shared.WithTx(bounded, func(tx *store.Store) error {
				_, err := tx.LockTripForPayment(bounded, "acct_other", trip.ID)
				return err
			})).To(MatchError(store.ErrNotFound))
			close(release)
			Expect(<-owner).To(Succeed())
		})

		It("refuses payments of unknown trips", func(ctx SpecContext) {
			_, err := e.shared.CreatePayment(ctx, payment(newID("trp_"), store.PaymentSucceeded))
			Expect(err).To(MatchError(store.ErrInvalidReference))
			Expect(e.shared.WithTx(ctx, func(tx *store.Store) error {
				_, err := tx.LockTripForPayment(ctx, store.DefaultAccount, newID("trp_"))
				return err
			})).To(MatchError(store.ErrNotFound))
			trip := createTrip(ctx, e.shared, tripOpts{})
			Expect(e.shared.WithTx(ctx, func(tx *store.Store) error {
				_, err := tx.LockTripForPayment(ctx, "acct_other", trip.ID)
				return err
			})).To(MatchError(store.ErrNotFound), "another account's trip is not found either")
		})

		It("pages a trip's receipts newest first, both ways, with ties broken by id", func(ctx SpecContext) {
			trip := createTrip(ctx, e.shared, tripOpts{})
			other := createTrip(ctx, e.shared, tripOpts{})
			paid, err := e.shared.CreatePayment(ctx, payment(trip.ID, store.PaymentSucceeded))
			Expect(err).NotTo(HaveOccurred())
			otherPaid, err := e.shared.CreatePayment(ctx, payment(other.ID, store.PaymentSucceeded))
			Expect(err).NotTo(HaveOccurred())
			base := time.Now().UTC().Truncate(time.Microsecond)
			var want []string // newest first
			for i := range 7 {
				r, err := e.shared.CreateReceipt(ctx, store.Receipt{ID: newID("rcp_"), TripID: trip.ID, PaymentID: paid.ID,
					Amount: 1850, Currency: "usd", LineItems: "[]", IssuedAt: base.Add(time.Duration(i/2) * time.Second)})
				Expect(err).NotTo(HaveOccurred())
				want = append(want, r.ID)
			}
			_, err = e.shared.CreateReceipt(ctx, store.Receipt{ID: newID("rcp_"), TripID: other.ID, PaymentID: otherPaid.ID,
				Amount: 1850, Currency: "usd", LineItems: "[]", IssuedAt: base})
			Expect(err).NotTo(HaveOccurred())

			all, err := e.shared.ListReceipts(ctx, store.ReceiptListParams{TripID: trip.ID, Limit: 100})
			Expect(err).NotTo(HaveOccurred())
			Expect(all.Receipts).To(HaveLen(7))
			for i := 1; i < len(all.Receipts); i++ {
				a, b := all.Receipts[i-1], all.Receipts[i]
				Expect(a.IssuedAt.After(b.IssuedAt) || (a.IssuedAt.Equal(b.IssuedAt) && a.ID > b.ID)).To(BeTrue())
			}
			Expect(all.MoreAfter || all.MoreBefore).To(BeFalse())

			var walked []string
			var after *store.Keyset
			for {
				page, err := e.shared.ListReceipts(ctx, store.ReceiptListParams{TripID: trip.ID, After: after, Limit: 3})
				Expect(err).NotTo(HaveOccurred())
				Expect(page.MoreBefore).To(Equal(after != nil))
				for _, r := range page.Receipts {
					walked = append(walked, r.ID)
				}
				if !page.MoreAfter {
					break
				}
				ks := page.Receipts[len(page.Receipts)-1].Keyset()
				after = &ks
			}
			ids := make([]string, len(all.Receipts))
			for i, r := range all.Receipts {
				ids[i] = r.ID
			}
			Expect(walked).To(Equal(ids))
			Expect(walked).To(ConsistOf(want))

			// Backward from the last receipt: the two before it, in list order.
			ks := all.Receipts[6].Keyset()
			back, err := e.shared.ListReceipts(ctx, store.ReceiptListParams{TripID: trip.ID, Before: &ks, Limit: 2})
			Expect(err).NotTo(HaveOccurred())
			Expect([]string{back.Receipts[0].ID, back.Receipts[1].ID}).To(Equal(ids[4:6]))
			Expect(back.MoreBefore).To(BeTrue())
			Expect(back.MoreAfter).To(BeTrue())
		})

		It("refuses list parameters it cannot run", func(ctx SpecContext) {
			ks := store.Keyset{Values: []int64{1}, ID: "rcp_x"}
			_, err := e.shared.ListReceipts(ctx, store.ReceiptListParams{TripID: "t", Limit: 0})
			Expect(err).To(MatchError(store.ErrInvalidListParams))
			_, err = e.shared.ListReceipts(ctx, store.ReceiptListParams{TripID: "t", Limit: 1, After: &ks, Before: &ks})
			Expect(err).To(MatchError(store.ErrInvalidListParams))
			_, err = e.shared.ListReceipts(ctx, store.ReceiptListParams{TripID: "t", Limit: 1, After: &store.Keyset{ID: "x"}})
			Expect(err).To(MatchError(store.ErrInvalidListParams))
		})
	})
})
