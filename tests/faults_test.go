package tests

import (
	"context"

	"github.com/rideapi/ride/server/app"

	. "github.com/onsi/ginkgo/v2"
)

// FaultFunc fails a request at a named point of its work (server.Deps.Faults) by returning an
// error or panicking; nil lets it go on. subject is what the point is about (a trip id); ctx
// is the request's (pipeline.ClientGone tells when its client went away).
type FaultFunc func(ctx context.Context, point, subject string) error

// SetFault installs f for the rest of the current spec.
func (h *Harness) SetFault(f FaultFunc) {
	h.faults.Store(&f)
	DeferCleanup(func() { h.faults.Store(nil) })
}

func (h *Harness) fault(ctx context.Context, point, subject string) error {
	if f := h.faults.Load(); f != nil {
		return (*f)(ctx, point, subject)
	}
	return nil
}

// SetProvider replaces the payment provider for the rest of the current spec.
func (h *Harness) SetProvider(p app.PaymentProvider) {
	h.provider.Store(&p)
	DeferCleanup(func() { h.provider.Store(nil) })
}

// switchableProvider is the harness's payment provider: the simulated one unless a spec
// installed another.
type switchableProvider struct{ h *Harness }

func (p switchableProvider) Charge(ctx context.Context, c app.Charge) (app.ChargeResult, error) {
	if override := p.h.provider.Load(); override != nil {
		return (*override).Charge(ctx, c)
	}
	return app.SimulatedProvider{}.Charge(ctx, c)
}

// ProviderFunc adapts a function to app.PaymentProvider.
type ProviderFunc func(ctx context.Context, c app.Charge) (app.ChargeResult, error)

// Charge calls f.
func (f ProviderFunc) Charge(ctx context.Context, c app.Charge) (app.ChargeResult, error) {
	return f(ctx, c)
}
