package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
)

// PaymentProvider charges payment methods. The app declares it, the consumer side, so that a
// real provider's client (or a test double) plugs in through Config without the app knowing
// more than this.
type PaymentProvider interface {
	// Charge asks for c.Amount of c.Currency from c.Method. A decline is a result (Succeeded
	// false, with a FailureCode), not an error; an error means the provider could not be
	// asked or did not answer, and the outcome is unknown. Charge must honour
	// c.IdempotencyKey: the same key charges at most once, so that a payment retried after an
	// error cannot charge twice. ctx is not cancelled when the API client goes away (a begun
	// request runs to its end), so Charge must bound its own wait (a client timeout).
	Charge(ctx context.Context, c Charge) (ChargeResult, error)
}

// Charge is one request to a payment provider.
type Charge struct {
	// IdempotencyKey is stable across retries of the same payment request (it is derived
	// from the caller's account and Idempotency-Key), never from anything random.
	IdempotencyKey string
	TripID         string
	Amount         int64
	Currency       string
	// Method is the payment-method token. Internal: never log it.
	Method string
}

// ChargeResult is the provider's answer to a Charge.
type ChargeResult struct {
	Succeeded bool
	// FailureCode says why a charge was declined.
	FailureCode string
	// Reference is the provider's id of the charge, kept for reconciliation.
	Reference string
}

// PaymentProviderError wraps a provider failure (unreachable, timeout, 5xx): the API answers
// 502 and stores nothing, so the client retries with the same Idempotency-Key.
type PaymentProviderError struct {
	Err error
}

func (e *PaymentProviderError) Error() string { return "payment provider: " + e.Err.Error() }

func (e *PaymentProviderError) Unwrap() error { return e.Err }

// Failure codes of declined charges, as published in Problem.failure_code and in
// payment.failed events.
const (
	FailureCardDeclined         = "card_declined"
	FailureInsufficientFunds    = "insufficient_funds"
	FailureExpiredCard          = "expired_card"
	FailureInvalidPaymentMethod = "invalid_payment_method"
)

// SimulatedProvider is the built-in payment provider: it moves no money and answers from the
// payment-method token alone, so the whole payment flow can be tried and tested without an
// account anywhere. Its test methods are documented with PaymentCreate.payment_method in
// openapi/ride.yaml.
type SimulatedProvider struct{}

// simulatedOutcomes maps the documented test methods to their failure codes; "" succeeds.
// Every other token is declined as invalid_payment_method.
var simulatedOutcomes = map[string]string{
	"pm_card_visa":               "",
	"pm_card_mastercard":         "",
	"pm_card_amex":               "",
	"pm_card_declined":           FailureCardDeclined,
	"pm_card_insufficient_funds": FailureInsufficientFunds,
	"pm_card_expired":            FailureExpiredCard,
}

// Charge answers by the token. The reference is derived from the idempotency key, as a real
// provider's would be the same charge for the same key.
func (SimulatedProvider) Charge(_ context.Context, c Charge) (ChargeResult, error) {
	sum := sha256.Sum256([]byte(c.IdempotencyKey))
	ref := "ch_sim_" + hex.EncodeToString(sum[:12])
	code, known := simulatedOutcomes[c.Method]
	if !known {
		code = FailureInvalidPaymentMethod
	}
	return ChargeResult{Succeeded: code == "", FailureCode: code, Reference: ref}, nil
}
