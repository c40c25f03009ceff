package server

import (
	"context"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/app"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/store"
)

// CreatePayment charges a completed trip's fare (app.Pay). It runs inside the idempotency
// layer's transaction (the key is required), so the payment, its receipt, its event and the
// stored answer commit together.
func (s *Server) CreatePayment(ctx context.Context, req gen.CreatePaymentRequestObject) (gen.CreatePaymentResponseObject, error) {
	body := req.Body
	payment, err := s.app.Pay(ctx, auth.PrincipalFrom(ctx), app.PayParams{
		TripID: body.TripId, Amount: body.Amount, Currency: body.Currency, Method: body.PaymentMethod,
		IdempotencyKey: req.Params.IdempotencyKey,
	})
	if err != nil {
		return nil, err
	}
	return gen.CreatePayment201JSONResponse{
		Body:    paymentView(payment),
		Headers: gen.CreatePayment201ResponseHeaders{Location: "/v1/trips/" + payment.TripID + "/payment"},
	}, nil
}

// GetTripPayment returns a trip's succeeded payment to its rider or an admin (app.TripPayment).
func (s *Server) GetTripPayment(ctx context.Context, req gen.GetTripPaymentRequestObject) (gen.GetTripPaymentResponseObject, error) {
	p, err := s.app.TripPayment(ctx, auth.PrincipalFrom(ctx), req.TripId)
	if err != nil {
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
