package store_test

import (
	"context"
	"fmt"
	"reflect"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/store"
)

// The store writes payments, receipts and events with INSERTs of its own rather than GORM's
// (store/inserts.go). Each is written here with every field of its model set to a value no
// other field of the row holds, and read back through GORM's mapping of the model: a field the
// statement leaves out, or two columns swapped, come back different.
var _ = Describe("Hand-written inserts", func() {
	forEachEngine(func(e *testEngine) {
		It("store every field of a payment, a receipt and an event", func(ctx SpecContext) {
			trip := createTrip(ctx, e.shared, tripOpts{})
			// Written in another zone, below the microsecond: stored, and read, in UTC to the
			// microsecond, as every stored time.
			at := time.Date(2026, 3, 4, 5, 6, 7, 891011234, time.FixedZone("IST", 5*3600+1800))
			stored := at.UTC().Truncate(time.Microsecond)
			declined := "card_declined"

			payment := store.Payment{ID: newID("pay_"), TripID: trip.ID, Amount: 1850, Currency: "usd",
				Status: store.PaymentFailed, FailureCode: &declined, PaymentMethod: "pm_card_visa",
				ProviderRef: "ch_3Nq", CreatedAt: at}
			expectEveryFieldSetOnce(payment)
			_, err := e.shared.CreatePayment(ctx, payment)
			Expect(err).NotTo(HaveOccurred())
			var storedPayment store.Payment
			Expect(e.shared.TestDB().WithContext(ctx).Where("id = ?", payment.ID).Take(&storedPayment).Error).To(Succeed())
			payment.CreatedAt = stored
			Expect(storedPayment).To(Equal(payment))

			receipt := store.Receipt{ID: newID("rcp_"), TripID: trip.ID, PaymentID: payment.ID, Amount: 1850,
				Currency: "usd", LineItems: `[{"kind":"base_fare","amount":1850}]`, IssuedAt: at.Add(time.Second)}
			expectEveryFieldSetOnce(receipt)
			_, err = e.shared.CreateReceipt(ctx, receipt)
			Expect(err).NotTo(HaveOccurred())
			var storedReceipt store.Receipt
			Expect(e.shared.TestDB().WithContext(ctx).Where("id = ?", receipt.ID).Take(&storedReceipt).Error).To(Succeed())
			receipt.IssuedAt = stored.Add(time.Second)
			Expect(storedReceipt).To(Equal(receipt))

			event, err := e.shared.AppendEvent(ctx, store.Event{ID: newID("evt_"), Account: trip.Account,
				Type: "payment.failed", SubjectID: payment.ID, Data: `{"id": "x"}`, CreatedAt: at.Add(2 * time.Second)})
			Expect(err).NotTo(HaveOccurred())
			expectEveryFieldSetOnce(event) // Seq included: the insert returned it
			var storedEvent store.Event
			Expect(e.shared.TestDB().WithContext(ctx).Where("id = ?", event.ID).Take(&storedEvent).Error).To(Succeed())
			Expect(storedEvent).To(Equal(event))
			Expect(event.CreatedAt).To(Equal(stored.Add(2 * time.Second)))
		})

		It("store every field of a fare estimate, and read each back", func(ctx SpecContext) {
			trip := createTrip(ctx, e.shared, tripOpts{})
			at := time.Date(2026, 3, 4, 5, 6, 7, 891011234, time.FixedZone("IST", 5*3600+1800))
			stored := at.UTC().Truncate(time.Microsecond)
			from, to, tripID := "1 Market St", "Pier 39", trip.ID
			used := at.Add(3 * time.Second)
			estimate := store.FareEstimate{ID: newID("est_"), RideType: "comfort", City: trip.City,
				OriginLat: 37.1, OriginLng: -122.2, OriginAddress: &from, DestinationLat: 37.3, DestinationLng: -122.4,
				DestinationAddress: &to, DistanceMeters: 4321, DurationSeconds: 654, PriceMin: 1500, PriceMax: 1900,
				Currency: "usd", CreatorRole: "rider", CreatorSubject: trip.RiderID, CreatorAccount: trip.Account,
				CreatedAt: at, ExpiresAt: at.Add(10 * time.Minute), UsedAt: &used, TripID: &tripID}
			expectEveryFieldSetOnce(estimate)
			_, err := e.shared.CreateFareEstimate(ctx, estimate)
			Expect(err).NotTo(HaveOccurred())

			usedStored := stored.Add(3 * time.Second)
			estimate.CreatedAt, estimate.ExpiresAt, estimate.UsedAt = stored, stored.Add(10*time.Minute), &usedStored
			var throughGORM store.FareEstimate
			Expect(e.shared.TestDB().WithContext(ctx).Where("id = ?", estimate.ID).Take(&throughGORM).Error).To(Succeed())
			Expect(throughGORM).To(Equal(estimate))
			read, err := e.shared.FareEstimateByID(ctx, trip.Account, estimate.ID)
			Expect(err).NotTo(HaveOccurred())
			Expect(read).To(Equal(estimate))
			Expect(read.CreatedAt.Location()).To(Equal(time.UTC))
			// And as a booking reads it, in a request's transaction: on PostgreSQL through pgx
			// on the transaction's connection.
			reqCtx := context.WithoutCancel(ctx)
			Expect(e.shared.WithTx(reqCtx, func(tx *store.Store) (err error) {
				read, err = tx.FareEstimateByID(reqCtx, trip.Account, estimate.ID)
				return err
			})).To(Succeed())
			Expect(read).To(Equal(estimate))
			Expect(read.CreatedAt.Location()).To(Equal(time.UTC))

			// Unused and unbooked: the nullable columns come back nil.
			fresh := store.FareEstimate{ID: newID("est_"), RideType: "xl", City: trip.City, OriginLat: 1, OriginLng: 2,
				DestinationLat: 3, DestinationLng: 4, Currency: "usd", CreatorRole: "admin", CreatorAccount: trip.Account,
				CreatedAt: stored, ExpiresAt: stored.Add(time.Minute)}
			_, err = e.shared.CreateFareEstimate(ctx, fresh)
			Expect(err).NotTo(HaveOccurred())
			Expect(e.shared.FareEstimateByID(ctx, trip.Account, fresh.ID)).To(Equal(fresh))
			_, err = e.shared.FareEstimateByID(ctx, "acct_other", fresh.ID)
			Expect(err).To(MatchError(store.ErrNotFound), "another account's estimate is absent")
		})

		It("store every column of a trip", func(ctx SpecContext) {
			driver := createDriver(ctx, e.shared, driverOpts{})
			rider := createRider(ctx, e.shared)
			at := time.Date(2026, 3, 4, 5, 6, 7, 891011234, time.FixedZone("IST", 5*3600+1800))
			stored := at.UTC().Truncate(time.Microsecond)
			from, to, eta := "1 Market St", "Pier 39", 7
			completed, cancelled := at.Add(4*time.Second), at.Add(5*time.Second)
			trip := store.Trip{ID: newID("trp_"), Account: store.DefaultAccount, Status: store.TripStatusCompleted,
				RideType: "comfort", City: driver.City, RiderID: rider.ID, DriverID: driver.ID,
				PickupLat: 37.1, PickupLng: -122.2, PickupAddress: &from, DropoffLat: 37.3, DropoffLng: -122.4,
				DropoffAddress: &to, PickupTime: at, FareTotal: 1850, FareCurrency: "usd", ETAMinutes: &eta,
				CreatedAt: at.Add(time.Second), UpdatedAt: at.Add(2 * time.Second), CompletedAt: &completed,
				CancelledAt: &cancelled, RoutePolyline: "_p~iF~ps|U", MatchingScore: 0.75, DriverPayout: 1480, PlatformCost: 37}
			// Inserted as a booking inserts it, in a request's transaction: on PostgreSQL through
			// pgx on the transaction's connection.
			reqCtx := context.WithoutCancel(ctx)
			Expect(e.shared.WithTx(reqCtx, func(tx *store.Store) error {
				_, err := tx.CreateTrip(reqCtx, trip)
				return err
			})).To(Succeed())

			var back store.Trip
			Expect(e.shared.TestDB().WithContext(ctx).Where("id = ?", trip.ID).Take(&back).Error).To(Succeed())
			completedStored, cancelledStored := stored.Add(4*time.Second), stored.Add(5*time.Second)
			trip.PickupTime, trip.CreatedAt, trip.UpdatedAt = stored, stored.Add(time.Second), stored.Add(2*time.Second)
			trip.CompletedAt, trip.CancelledAt = &completedStored, &cancelledStored
			Expect(back).To(Equal(trip))

			_, err := e.shared.CreateTrip(ctx, trip)
			Expect(err).To(MatchError(store.ErrDuplicate))
		})

		It("stamp a payment or an event written without a time with the store's clock, as GORM did", func(ctx SpecContext) {
			trip := createTrip(ctx, e.shared, tripOpts{})
			before := time.Now().Add(-time.Second)
			payment, err := e.shared.CreatePayment(ctx, store.Payment{ID: newID("pay_"), TripID: trip.ID, Amount: 1850,
				Currency: "usd", Status: store.PaymentFailed, PaymentMethod: "pm_card_visa"})
			Expect(err).NotTo(HaveOccurred())
			event, err := e.shared.AppendEvent(ctx, store.Event{ID: newID("evt_"), Account: trip.Account,
				Type: "payment.failed", SubjectID: payment.ID, Data: `{}`})
			Expect(err).NotTo(HaveOccurred())
			for _, at := range []time.Time{payment.CreatedAt, event.CreatedAt} {
				Expect(at).To(BeTemporally(">", before))
				Expect(at.Location()).To(Equal(time.UTC))
			}
		})

		It("answer an error, not a panic, when the statement cannot run", func(ctx SpecContext) {
			trip := createTrip(ctx, e.shared, tripOpts{})
			expired, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
			defer cancel()
			_, err := e.shared.AppendEvent(expired, store.Event{ID: newID("evt_"), Account: trip.Account,
				Type: "trip.completed", SubjectID: trip.ID, Data: `{}`, CreatedAt: time.Now()})
			Expect(err).To(HaveOccurred())
			_, err = e.shared.TripPaid(expired, trip.ID)
			Expect(err).To(HaveOccurred())
		})
	})
})

// expectEveryFieldSetOnce fails unless every field of the struct v is set, and no two fields
// hold the same value: a model's new field must be given a value in the spec above.
func expectEveryFieldSetOnce(v any) {
	GinkgoHelper()
	rv := reflect.ValueOf(v)
	seen := map[string]string{}
	for i := range rv.NumField() {
		name, f := rv.Type().Field(i).Name, rv.Field(i)
		Expect(f.IsZero()).To(BeFalse(), "%T.%s is not set", v, name)
		if f.Kind() == reflect.Pointer {
			f = f.Elem()
		}
		value := fmt.Sprint(f.Interface())
		Expect(seen).NotTo(HaveKey(value), "%T.%s holds the value of %s", v, name, seen[value])
		seen[value] = name
	}
}
