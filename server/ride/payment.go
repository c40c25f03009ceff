package ride

import (
	"errors"
	"fmt"
)

// Event types of payments, as sent in webhooks and /v1/events.
const (
	// EventPaymentSucceeded is emitted when a trip's fare is charged.
	EventPaymentSucceeded = "payment.succeeded"
	// EventPaymentFailed is emitted when the provider declines a charge.
	EventPaymentFailed = "payment.failed"
)

// Payment rule violations. The API maps each to its answer: 409 trip_not_completed,
// 409 trip_already_paid, 422 amount_mismatch.
var (
	// ErrTripNotCompleted: only a completed trip can be paid.
	ErrTripNotCompleted = errors.New("ride: trip not completed")
	// ErrTripAlreadyPaid: a trip is paid once.
	ErrTripAlreadyPaid = errors.New("ride: trip already paid")
	// ErrAmountMismatch: the payment must state the fare exactly.
	ErrAmountMismatch = errors.New("ride: amount does not match the fare")
)

// CheckPayment applies the rules a payment of a trip must meet before any money moves: the
// trip is completed, and the amount and currency the client states are exactly its fare (the
// client confirms what it expects to be charged; a stale or tampered amount is refused rather
// than charged). Whether the trip is already paid needs the store, so the caller checks that.
func CheckPayment(status TripStatus, fareTotal int64, fareCurrency string, amount int64, currency string) error {
	if status != StatusCompleted {
		return &TripNotCompletedError{Status: status}
	}
	if amount != fareTotal || currency != fareCurrency {
		return &AmountMismatchError{FareTotal: fareTotal, FareCurrency: fareCurrency, Amount: amount, Currency: currency}
	}
	return nil
}

// TripNotCompletedError keeps the status of a trip paid too early; errors.Is matches
// ErrTripNotCompleted.
type TripNotCompletedError struct {
	Status TripStatus
}

// Error names the trip's status.
func (e *TripNotCompletedError) Error() string {
	return fmt.Sprintf("ride: trip not completed: it is %s", e.Status)
}

// Unwrap lets errors.Is(err, ErrTripNotCompleted) hold.
func (e *TripNotCompletedError) Unwrap() error { return ErrTripNotCompleted }

// AmountMismatchError keeps the fare and the stated amount, so the answer can say which is
// right; errors.Is matches ErrAmountMismatch.
type AmountMismatchError struct {
	FareTotal    int64
	FareCurrency string
	Amount       int64
	Currency     string
}

// Error says what was stated and what the fare is.
func (e *AmountMismatchError) Error() string {
	return fmt.Sprintf("ride: amount %d %s does not match the fare %d %s", e.Amount, e.Currency, e.FareTotal, e.FareCurrency)
}

// Unwrap lets errors.Is(err, ErrAmountMismatch) hold.
func (e *AmountMismatchError) Unwrap() error { return ErrAmountMismatch }

// PaymentDeclinedError is a charge the provider refused; FailureCode says why
// (card_declined, insufficient_funds, expired_card, invalid_payment_method). The API answers
// 422 payment_declined with the code.
type PaymentDeclinedError struct {
	FailureCode string
}

// Error names the reason.
func (e *PaymentDeclinedError) Error() string {
	return "ride: payment declined: " + e.FailureCode
}
