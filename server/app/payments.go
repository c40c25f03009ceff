package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/problem"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// Payments: a completed trip's fare, charged once, with its receipt.

// PayParams is a payment: the trip, the amount and currency (which must equal its fare), the
// payment method token, and the caller's Idempotency-Key, from which the provider's own key
// is derived.
type PayParams struct {
	TripID         string
	Amount         int64
	Currency       string
	Method         string
	IdempotencyKey string
}

// Pay charges a completed trip's fare and, on success, issues its receipt. It runs in the
// transaction ctx carries (the idempotency layer's: the key is required), so the payment, the
// receipt, the event and the stored answer commit together. A declined charge commits too:
// the failed payment and its payment.failed event are the record of the attempt, and the
// ride.PaymentDeclinedError it returns with the payment is the answer its key replays. Every
// refusal comes before the first write, so the writes need no savepoint of their own.
func (a *App) Pay(ctx context.Context, caller auth.Principal, p PayParams) (store.Payment, error) {
	if !caller.IsAdmin() && caller.Role != auth.RoleRider {
		return store.Payment{}, Forbidden("Only the trip's rider or an admin may pay for a trip.")
	}
	var payment store.Payment
	err := a.inTx(ctx, func(tx *store.Store) error {
		trip, err := payableTrip(ctx, tx, caller, p.TripID)
		if err != nil {
			return err
		}
		// Paid first: for a paid trip that is the answer, whatever amount was stated.
		if paid, err := tx.TripPaid(ctx, trip.ID); err != nil {
			return err
		} else if paid {
			return ride.ErrTripAlreadyPaid
		}
		if err := ride.CheckPayment(ride.TripStatus(trip.Status), trip.FareTotal, trip.FareCurrency, p.Amount, p.Currency); err != nil {
			return err
		}

		// The provider is asked inside the transaction, after the trip is locked: a second
		// payment of the trip waits here and then finds it paid, so it never reaches the
		// provider. If this transaction rolls back after a successful charge, a retry with
		// the same Idempotency-Key sends the provider the same key, which charges only once.
		result, err := a.payments.Charge(ctx, Charge{
			IdempotencyKey: providerIdempotencyKey(caller.Account, p.IdempotencyKey, trip.ID, p.Amount, p.Currency),
			TripID:         trip.ID, Amount: p.Amount, Currency: p.Currency, Method: p.Method,
		})
		if err != nil {
			return &PaymentProviderError{Err: err}
		}
		payment = store.Payment{
			ID: ride.NewID(ride.PrefixPayment), TripID: trip.ID, Amount: p.Amount, Currency: p.Currency,
			Status: store.PaymentSucceeded, PaymentMethod: p.Method, ProviderRef: result.Reference,
			CreatedAt: a.now(),
		}
		if !result.Succeeded {
			payment.Status = store.PaymentFailed
			payment.FailureCode = &result.FailureCode
		}
		payment, err = tx.CreatePayment(ctx, payment)
		if errors.Is(err, store.ErrDuplicate) {
			// The unique index caught a concurrent payment, without failing a statement:
			// nothing was written, and the transaction can still record this answer.
			return ride.ErrTripAlreadyPaid
		} else if err != nil {
			return err
		}
		if result.Succeeded {
			if _, err := issueReceipt(ctx, tx, trip, payment); err != nil {
				return err
			}
		}
		if err := appendPaymentEvent(ctx, tx, trip.Account, payment); err != nil {
			return err
		}
		return a.fault(ctx, FaultPaymentRecorded, trip.ID)
	})
	if err != nil {
		return store.Payment{}, err
	}
	if payment.Status == store.PaymentFailed {
		return payment, &ride.PaymentDeclinedError{FailureCode: *payment.FailureCode}
	}
	return payment, nil
}

// payableTrip locks and loads the trip a payment names, with its city's rates, for a caller
// who may pay it: 422 trip_not_found when it does not exist or belongs to another account (the
// id is in the body, not the path), 403 when it is another rider's.
func payableTrip(ctx context.Context, tx *store.Store, caller auth.Principal, tripID string) (store.PayableTrip, error) {
	notFound := problem.New(problem.TripNotFound, "No trip "+problem.TruncateID(tripID)+".")
	notFound.Fields = []problem.FieldError{{Location: "body.trip_id", Message: "no such trip"}}
	if !ride.ValidID(ride.PrefixTrip, tripID) {
		return store.PayableTrip{}, notFound
	}
	trip, err := tx.LockTripForPayment(ctx, caller.Account, tripID)
	if errors.Is(err, store.ErrNotFound) {
		return store.PayableTrip{}, notFound
	} else if err != nil {
		return store.PayableTrip{}, err
	}
	if !caller.IsAdmin() && !caller.Is(auth.RoleRider, trip.RiderID) {
		return store.PayableTrip{}, Forbidden("This trip belongs to another rider.")
	}
	return trip, nil
}

// providerIdempotencyKey is what the provider deduplicates charges by: stable across retries
// of one payment request, distinct across accounts and across payments that reuse a client key
// after its record expired.
func providerIdempotencyKey(account, key, tripID string, amount int64, currency string) string {
	sum := sha256.Sum256([]byte(ride.QueryKey(account, key, tripID, strconv.FormatInt(amount, 10), currency)))
	return "ride_" + hex.EncodeToString(sum[:16])
}

// receiptLineItem is one line of a receipt, as its view spells it.
type receiptLineItem struct {
	Kind   string `json:"kind"`
	Amount int64  `json:"amount"`
}

// issueReceipt writes the receipt of a succeeded payment: the fare broken down by the city's
// rates, adding up to the amount paid.
func issueReceipt(ctx context.Context, tx *store.Store, trip store.PayableTrip, p store.Payment) (store.Receipt, error) {
	city := trip.Rates
	lines := ride.ReceiptLines(p.Amount,
		ride.Point{Lat: trip.PickupLat, Lng: trip.PickupLng}, ride.Point{Lat: trip.DropoffLat, Lng: trip.DropoffLng},
		ride.Rates{Currency: city.Currency, BaseFare: city.BaseFare, PerKm: city.PerKm, PerMinute: city.PerMinute, MinimumFare: city.MinimumFare})
	items := make([]receiptLineItem, len(lines))
	for i, l := range lines {
		items[i] = receiptLineItem{Kind: string(l.Kind), Amount: l.Amount}
	}
	data, err := json.Marshal(items)
	if err != nil {
		return store.Receipt{}, err
	}
	return tx.CreateReceipt(ctx, store.Receipt{
		ID: ride.NewID(ride.PrefixReceipt), TripID: trip.ID, PaymentID: p.ID, Amount: p.Amount, Currency: p.Currency,
		LineItems: string(data), IssuedAt: p.CreatedAt,
	})
}

// TripPayment is a trip's succeeded payment, for its rider or an admin. A driver is refused
// before the lookup, so the answer says nothing of whether the trip exists.
func (a *App) TripPayment(ctx context.Context, caller auth.Principal, tripID string) (store.Payment, error) {
	if !caller.IsAdmin() && caller.Role != auth.RoleRider {
		return store.Payment{}, Forbidden("Only the trip's rider or an admin may read its payment.")
	}
	trip, err := a.VisibleTrip(ctx, caller, tripID)
	if err != nil {
		return store.Payment{}, err
	}
	p, err := a.Store(ctx).SucceededPaymentForTrip(ctx, trip.ID)
	if errors.Is(err, store.ErrNotFound) {
		return store.Payment{}, problem.New(problem.NotFound, "The trip "+trip.ID+" has no payment yet.")
	}
	return p, err
}
