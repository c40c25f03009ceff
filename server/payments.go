package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/problem"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// Fault points: where Deps.Faults may fail a request, named by what has happened so far.
const (
	// faultPaymentRecorded: the payment, its receipt and its event are written, uncommitted.
	faultPaymentRecorded = "payment.recorded"
	// faultDriverClaimed: a booking consumed its estimate and claimed a driver, uncommitted.
	faultDriverClaimed = "booking.driver_claimed"
)

// fault calls the test hook, if any, at a named point.
func (s *Server) fault(ctx context.Context, point, subject string) error {
	if s.faults == nil {
		return nil
	}
	return s.faults(ctx, point, subject)
}

// CreatePayment charges a completed trip's fare and, on success, issues its receipt. It runs
// inside the idempotency layer's transaction (the key is required), so the payment, the
// receipt, the event and the stored answer commit together. A declined charge commits too:
// the failed payment and its payment.failed event are the record of the attempt, and the 422
// is the answer its key replays. Every refusal comes before the first write, so the writes need
// no savepoint of their own (inRequestTx).
func (s *Server) CreatePayment(ctx context.Context, req gen.CreatePaymentRequestObject) (gen.CreatePaymentResponseObject, error) {
	caller := auth.PrincipalFrom(ctx)
	if !caller.IsAdmin() && caller.Role != auth.RoleRider {
		return nil, forbidden("Only the trip's rider or an admin may pay for a trip.")
	}
	body := req.Body
	var payment store.Payment
	err := s.inRequestTx(ctx, func(tx *store.Store) error {
		trip, err := payableTrip(ctx, tx, caller, body.TripId)
		if err != nil {
			return err
		}
		// Paid first: for a paid trip that is the answer, whatever amount was stated.
		if _, err := tx.SucceededPaymentForTrip(ctx, trip.ID); err == nil {
			return ride.ErrTripAlreadyPaid
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err := ride.CheckPayment(ride.TripStatus(trip.Status), trip.FareTotal, trip.FareCurrency, body.Amount, body.Currency); err != nil {
			return err
		}

		// The provider is asked inside the transaction, after the trip is locked: a second
		// payment of the trip waits here and then finds it paid, so it never reaches the
		// provider. If this transaction rolls back after a successful charge, a retry with
		// the same Idempotency-Key sends the provider the same key, which charges only once.
		result, err := s.payments.Charge(ctx, Charge{
			IdempotencyKey: providerIdempotencyKey(caller.Account, req.Params.IdempotencyKey, trip.ID, body.Amount, body.Currency),
			TripID:         trip.ID, Amount: body.Amount, Currency: body.Currency, Method: body.PaymentMethod,
		})
		if err != nil {
			return &PaymentProviderError{Err: err}
		}
		payment = store.Payment{
			ID: ride.NewID(ride.PrefixPayment), TripID: trip.ID, Amount: body.Amount, Currency: body.Currency,
			Status: store.PaymentSucceeded, PaymentMethod: body.PaymentMethod, ProviderRef: result.Reference,
			CreatedAt: s.now(),
		}
		if !result.Succeeded {
			payment.Status = store.PaymentFailed
			payment.FailureCode = ptr(result.FailureCode)
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
			if _, err := s.issueReceipt(ctx, tx, trip, payment); err != nil {
				return err
			}
		}
		if err := appendPaymentEvent(ctx, tx, trip, payment); err != nil {
			return err
		}
		return s.fault(ctx, faultPaymentRecorded, trip.ID)
	})
	if err != nil {
		return nil, err
	}
	if payment.Status == store.PaymentFailed {
		return nil, &ride.PaymentDeclinedError{FailureCode: deref(payment.FailureCode)}
	}
	return gen.CreatePayment201JSONResponse{
		Body:    paymentView(payment),
		Headers: gen.CreatePayment201ResponseHeaders{Location: "/v1/trips/" + payment.TripID + "/payment"},
	}, nil
}

// payableTrip locks and loads the trip a payment names, for a caller who may pay it: 422
// trip_not_found when it does not exist or belongs to another account (the id is in the body,
// not the path), 403 when it is another rider's.
func payableTrip(ctx context.Context, tx *store.Store, caller auth.Principal, tripID string) (store.Trip, error) {
	notFound := problem.New(problem.TripNotFound, "No trip "+problem.TruncateID(tripID)+".")
	notFound.Fields = []problem.FieldError{{Location: "body.trip_id", Message: "no such trip"}}
	if !ride.ValidID(ride.PrefixTrip, tripID) {
		return store.Trip{}, notFound
	}
	trip, err := tx.LockTripForPayment(ctx, caller.Account, tripID)
	if errors.Is(err, store.ErrNotFound) {
		return store.Trip{}, notFound
	} else if err != nil {
		return store.Trip{}, err
	}
	if !caller.IsAdmin() && !caller.Is(auth.RoleRider, trip.RiderID) {
		return store.Trip{}, forbidden("This trip belongs to another rider.")
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

// paymentEventData is the payload of payment.succeeded and payment.failed. The payment
// method never appears in it.
type paymentEventData struct {
	PaymentID   string `json:"payment_id"`
	TripID      string `json:"trip_id"`
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	Status      string `json:"status"`
	FailureCode string `json:"failure_code,omitempty"`
}

// appendPaymentEvent writes the payment's event on tx, the payment's own transaction. The
// subject is the trip, so the trip's history reads as one sequence from booking to payment;
// the event belongs to the trip's account.
func appendPaymentEvent(ctx context.Context, tx *store.Store, trip store.Trip, p store.Payment) error {
	eventType := ride.EventPaymentSucceeded
	if p.Status == store.PaymentFailed {
		eventType = ride.EventPaymentFailed
	}
	data, err := json.Marshal(paymentEventData{
		PaymentID: p.ID, TripID: p.TripID, Amount: p.Amount, Currency: p.Currency, Status: p.Status,
		FailureCode: deref(p.FailureCode),
	})
	if err != nil {
		return err
	}
	_, err = tx.AppendEvent(ctx, store.Event{
		ID: ride.NewID(ride.PrefixEvent), Account: trip.Account, Type: eventType, SubjectID: p.TripID,
		Data: string(data), CreatedAt: p.CreatedAt,
	})
	return err
}

// GetTripPayment returns a trip's succeeded payment to its rider or an admin. A driver is
// refused before the lookup, so the answer says nothing of whether the trip exists.
func (s *Server) GetTripPayment(ctx context.Context, req gen.GetTripPaymentRequestObject) (gen.GetTripPaymentResponseObject, error) {
	caller := auth.PrincipalFrom(ctx)
	if !caller.IsAdmin() && caller.Role != auth.RoleRider {
		return nil, forbidden("Only the trip's rider or an admin may read its payment.")
	}
	trip, err := s.visibleTrip(ctx, req.TripId)
	if err != nil {
		return nil, err
	}
	p, err := s.storeFor(ctx).SucceededPaymentForTrip(ctx, trip.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, problem.New(problem.NotFound, "The trip "+trip.ID+" has no payment yet.")
	} else if err != nil {
		return nil, err
	}
	return gen.GetTripPayment200JSONResponse{Body: paymentView(p)}, nil
}

// paymentView is the public projection of a payment: the method token and the provider's
// reference have no member here, so they cannot leak.
func paymentView(p store.Payment) gen.Payment {
	return gen.Payment{
		Id: p.ID, TripId: p.TripID, Amount: p.Amount, Currency: p.Currency,
		Status: gen.PaymentStatus(p.Status), CreatedAt: p.CreatedAt.UTC(),
	}
}
