package app

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// The events a change writes in its own transaction (the outbox), their payloads as the
// contract names them (openapi/ride.yaml's Event schemas).

// tripStatusData is the payload of every trip.* event but trip.completed.
type tripStatusData struct {
	TripID     string    `json:"trip_id"`
	Status     string    `json:"status"`
	OccurredAt time.Time `json:"occurred_at"`
}

// money is an amount and its currency, as every view spells it.
type money struct {
	Total    int64  `json:"total"`
	Currency string `json:"currency"`
}

// tripCompletedData is the payload of trip.completed.
type tripCompletedData struct {
	TripID      string    `json:"trip_id"`
	Fare        money     `json:"fare"`
	CompletedAt time.Time `json:"completed_at"`
}

// appendTripEvent writes the event of the status trip has just entered, on tx, and tells the
// trip's followers: both commit or roll back with the change. Entering accepted is booking
// (trip.created).
func (a *App) appendTripEvent(ctx context.Context, tx *store.Store, trip store.Trip, at time.Time) error {
	status := ride.TripStatus(trip.Status)
	eventType := ride.EventType(status)
	var data any = tripStatusData{TripID: trip.ID, Status: trip.Status, OccurredAt: at.UTC()}
	switch {
	case status == ride.StatusAccepted:
		eventType = ride.EventTripCreated
	case status == ride.StatusCompleted && trip.CompletedAt != nil:
		data = tripCompletedData{
			TripID:      trip.ID,
			Fare:        money{Total: trip.FareTotal, Currency: trip.FareCurrency},
			CompletedAt: trip.CompletedAt.UTC(),
		}
	}
	if eventType == "" {
		return fmt.Errorf("no event for trip status %q", trip.Status)
	}
	payload, err := json.Marshal(data)
	if err != nil {
		return err
	}
	if _, err = tx.AppendEvent(ctx, store.Event{
		ID: ride.NewID(ride.PrefixEvent), Account: trip.Account, Type: eventType, SubjectID: trip.ID,
		Data: string(payload), CreatedAt: at,
	}); err != nil {
		return err
	}
	return a.tripChanged(ctx, tx, &trip, at)
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
func appendPaymentEvent(ctx context.Context, tx *store.Store, account string, p store.Payment) error {
	eventType := ride.EventPaymentSucceeded
	failure := ""
	if p.Status == store.PaymentFailed {
		eventType = ride.EventPaymentFailed
	}
	if p.FailureCode != nil {
		failure = *p.FailureCode
	}
	data, err := json.Marshal(paymentEventData{
		PaymentID: p.ID, TripID: p.TripID, Amount: p.Amount, Currency: p.Currency, Status: p.Status,
		FailureCode: failure,
	})
	if err != nil {
		return err
	}
	_, err = tx.AppendEvent(ctx, store.Event{
		ID: ride.NewID(ride.PrefixEvent), Account: account, Type: eventType, SubjectID: p.TripID,
		Data: string(data), CreatedAt: p.CreatedAt,
	})
	return err
}
