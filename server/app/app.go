// Package app is what Ride API does, whoever asks: the rules of booking, payment, the trip
// lifecycle and cancellation, drivers' availability and API keys, and who may see what. REST
// (package server), GraphQL (server/graphql) and the command line call it alike. It knows
// nothing of HTTP: callers translate their requests into its calls, and its results and
// errors (the catalogue's problems, the domain's errors of package ride) into their answers.
// It works over the store, inside the caller's transaction when the context carries one
// (store.ContextWithTx: the request pipeline's, for a keyed write).
package app

import (
	"context"
	"time"

	"github.com/rideapi/ride/store"
)

// DefaultEstimateTTL is how long a fare estimate can be booked unless configured otherwise.
const DefaultEstimateTTL = 300 * time.Second

// Config is what the app runs on.
type Config struct {
	Store *store.Store
	// Now is the clock, at microsecond precision in UTC.
	Now func() time.Time
	// Payments charges payments; nil means the built-in SimulatedProvider.
	Payments PaymentProvider
	// EstimateTTL is how long a fare estimate can be booked; zero means DefaultEstimateTTL.
	EstimateTTL time.Duration
	// TripChanged is told of every change of a trip its followers see (status, driver), inside
	// the change's transaction, so that they hear of it exactly when it commits.
	TripChanged func(ctx context.Context, tx *store.Store, t *store.Trip, at time.Time) error
	// Faults, when set, is called at named points of a request's work (the Fault* constants)
	// with the subject at hand, and a non-nil error (or a panic) fails the work there. Only
	// tests set it, to prove a failure half-way through leaves nothing behind.
	Faults func(ctx context.Context, point, subject string) error
}

// App holds what the rules need.
type App struct {
	store       *store.Store
	now         func() time.Time
	payments    PaymentProvider
	estimateTTL time.Duration
	tripChanged func(ctx context.Context, tx *store.Store, t *store.Trip, at time.Time) error
	faults      func(ctx context.Context, point, subject string) error
}

// New is an app over cfg.
func New(cfg Config) *App {
	a := &App{store: cfg.Store, now: cfg.Now, payments: cfg.Payments, estimateTTL: cfg.EstimateTTL,
		tripChanged: cfg.TripChanged, faults: cfg.Faults}
	if a.payments == nil {
		a.payments = SimulatedProvider{}
	}
	if a.estimateTTL <= 0 {
		a.estimateTTL = DefaultEstimateTTL
	}
	if a.tripChanged == nil {
		a.tripChanged = func(context.Context, *store.Store, *store.Trip, time.Time) error { return nil }
	}
	return a
}

// Fault points: where Config.Faults may fail the work, named by what has happened so far.
const (
	// FaultPaymentRecorded: the payment, its receipt and its event are written, uncommitted.
	FaultPaymentRecorded = "payment.recorded"
	// FaultDriverClaimed: a booking consumed its estimate and claimed a driver, uncommitted.
	FaultDriverClaimed = "booking.driver_claimed"
)

// fault calls the test hook, if any, at a named point.
func (a *App) fault(ctx context.Context, point, subject string) error {
	if a.faults == nil {
		return nil
	}
	return a.faults(ctx, point, subject)
}

// Store is the store of ctx: the transaction it carries, or the app's.
func (a *App) Store(ctx context.Context) *store.Store { return a.store.Within(ctx) }

// inTx runs fn in the transaction ctx carries, without a savepoint of its own, or in a new
// transaction when it carries none. A savepoint costs a round trip, and is only needed where
// writes must be undone while the caller's transaction commits its answer. So fn may fail with
// a refusal (an answer the caller records and commits) only before its first write; after it,
// only with a fault, which rolls everything back.
func (a *App) inTx(ctx context.Context, fn func(tx *store.Store) error) error {
	if store.InTx(ctx) {
		return fn(a.store.Within(ctx))
	}
	return a.store.WithTx(ctx, fn)
}
