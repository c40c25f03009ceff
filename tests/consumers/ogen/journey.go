// A partner's whole journey through the Go client ogen generates from openapi/ride.yaml
// (rideapi/, made by ../run.sh with `go tool ogen`): estimate, book, move the trip with
// If-Match (a stale one is refused), pay with an Idempotency-Key and replay it, read the
// receipt and the events, narrowed by their `type`. Every answer is decoded and validated by
// the generated code; nothing is decoded by hand.
//
//	RIDE_API_URL=… RIDE_ADMIN_KEY=rk_… RIDE_RIDER_KEY=rk_… go run .
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"ride-ogen-journey/rideapi"
)

// bearer is the client's credentials: one API key.
type bearer string

func (b bearer) BearerAuth(context.Context, rideapi.OperationName) (rideapi.BearerAuth, error) {
	return rideapi.BearerAuth{Token: string(b)}, nil
}

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "journey failed:", err)
		os.Exit(1)
	}
}

func need(name string) string {
	v := os.Getenv(name)
	if v == "" {
		fmt.Fprintln(os.Stderr, "set", name)
		os.Exit(2)
	}
	return v
}

func run(ctx context.Context) error {
	url := need("RIDE_API_URL")
	as := func(key string) (*rideapi.Client, error) { return rideapi.NewClient(url, bearer(key)) }
	admin, err := as(need("RIDE_ADMIN_KEY"))
	if err != nil {
		return err
	}
	rider, err := as(need("RIDE_RIDER_KEY"))
	if err != nil {
		return err
	}
	run := strconv.FormatInt(time.Now().UnixNano(), 36)

	// A rider rides one trip at a time: end any the rider still has.
	for _, status := range []rideapi.TripStatus{rideapi.TripStatusAccepted, rideapi.TripStatusArriving} {
		res, err := rider.ListTrips(ctx, rideapi.ListTripsParams{Status: rideapi.NewOptTripStatus(status)})
		if err != nil {
			return fmt.Errorf("list %s trips: %w", status, err)
		}
		page, ok := res.(*rideapi.TripListHeaders)
		if !ok {
			return fmt.Errorf("list %s trips answered %T", status, res)
		}
		for _, t := range page.Response.Data {
			res, err := rider.CreateTripCancellation(ctx, &rideapi.CancellationRequest{Reason: "Plans changed"},
				rideapi.CreateTripCancellationParams{TripId: t.ID})
			if err != nil {
				return fmt.Errorf("cancel %s: %w", t.ID, err)
			}
			if _, ok := res.(*rideapi.CancellationHeaders); !ok {
				return fmt.Errorf("cancel %s answered %T", t.ID, res)
			}
		}
	}

	// 1. Price a route, then book the estimate.
	estimated, err := rider.CreateFareEstimate(ctx, &rideapi.FareEstimateRequest{
		Origin:      rideapi.LocationInput{Lat: 37.7936, Lng: -122.395, Address: rideapi.NewOptString("1 Market St")},
		Destination: rideapi.LocationInput{Lat: 37.7599, Lng: -122.4148},
		RideType:    rideapi.RideTypeComfort,
	}, rideapi.CreateFareEstimateParams{})
	if err != nil {
		return fmt.Errorf("estimate: %w", err)
	}
	estimate, ok := estimated.(*rideapi.FareEstimateHeaders)
	if !ok {
		return fmt.Errorf("estimate answered %T", estimated)
	}
	booked, err := rider.CreateRide(ctx, &rideapi.RideRequest{EstimateID: estimate.Response.EstimateID},
		rideapi.CreateRideParams{IdempotencyKey: "ogen-book-" + run})
	if err != nil {
		return fmt.Errorf("book: %w", err)
	}
	trip, ok := booked.(*rideapi.TripHeaders)
	if !ok {
		return fmt.Errorf("booking answered %T", booked)
	}
	driverSummary, ok := trip.Response.DriverSummary.Get()
	if trip.Response.Status != rideapi.TripStatusAccepted || !ok {
		return fmt.Errorf("booked trip is %s", trip.Response.Status)
	}
	tripID := trip.Response.ID

	// 2. The trip's driver moves it along; If-Match with a stale ETag is refused.
	minted, err := admin.CreateApiKey(ctx, &rideapi.ApiKeyCreate{Role: rideapi.ApiKeyRoleDriver,
		Subject: rideapi.NewOptString(driverSummary.ID)}, rideapi.CreateApiKeyParams{})
	if err != nil {
		return fmt.Errorf("driver key: %w", err)
	}
	key, ok := minted.(*rideapi.ApiKeyCreatedHeaders)
	if !ok {
		return fmt.Errorf("driver key answered %T", minted)
	}
	driver, err := as(key.Response.Secret)
	if err != nil {
		return err
	}
	got, err := driver.GetTrip(ctx, rideapi.GetTripParams{TripId: tripID})
	if err != nil {
		return fmt.Errorf("driver read: %w", err)
	}
	read, ok := got.(*rideapi.GetTripOKHeaders)
	if !ok || read.ETag == "" {
		return fmt.Errorf("driver read answered %T", got)
	}
	move := func(status rideapi.TripStatus, ifMatch string) (rideapi.UpdateTripRes, error) {
		params := rideapi.UpdateTripParams{TripId: tripID}
		if ifMatch != "" {
			params.IfMatch = rideapi.NewOptString(ifMatch)
		}
		return driver.UpdateTrip(ctx, &rideapi.TripUpdate{Status: status}, params)
	}
	moved, err := move(rideapi.TripStatusArriving, read.ETag)
	if err != nil {
		return fmt.Errorf("arriving: %w", err)
	}
	if m, ok := moved.(*rideapi.UpdateTripOKHeaders); !ok || m.Response.Status != rideapi.TripStatusArriving {
		return fmt.Errorf("arriving answered %T", moved)
	}
	stale, err := move(rideapi.TripStatusInProgress, read.ETag)
	if err != nil {
		return fmt.Errorf("stale If-Match: %w", err)
	}
	if p, ok := stale.(*rideapi.PreconditionFailedHeaders); !ok || p.Response.Code != "precondition_failed" {
		return fmt.Errorf("stale If-Match answered %T", stale)
	}
	for _, status := range []rideapi.TripStatus{rideapi.TripStatusInProgress, rideapi.TripStatusCompleted} {
		moved, err := move(status, "")
		if err != nil {
			return fmt.Errorf("%s: %w", status, err)
		}
		if m, ok := moved.(*rideapi.UpdateTripOKHeaders); !ok || m.Response.Status != status {
			return fmt.Errorf("%s answered %T", status, moved)
		}
	}
	got, err = rider.GetTrip(ctx, rideapi.GetTripParams{TripId: tripID})
	if err != nil {
		return fmt.Errorf("completed trip: %w", err)
	}
	done, ok := got.(*rideapi.GetTripOKHeaders)
	if !ok {
		return fmt.Errorf("completed trip answered %T", got)
	}
	fare, ok := done.Response.Fare.Get()
	if done.Response.Status != rideapi.TripStatusCompleted || !ok {
		return fmt.Errorf("completed trip is %s", done.Response.Status)
	}

	// 3. Pay the exact fare once; the retry with the same key replays the stored answer.
	pay := func() (*rideapi.PaymentHeaders, error) {
		res, err := rider.CreatePayment(ctx, &rideapi.PaymentCreate{TripID: tripID, Amount: fare.Total,
			Currency: fare.Currency, PaymentMethod: "pm_card_visa"}, rideapi.CreatePaymentParams{IdempotencyKey: "ogen-pay-" + run})
		if err != nil {
			return nil, err
		}
		paid, ok := res.(*rideapi.PaymentHeaders)
		if !ok {
			return nil, fmt.Errorf("payment answered %T", res)
		}
		return paid, nil
	}
	paid, err := pay()
	if err != nil {
		return fmt.Errorf("pay: %w", err)
	}
	replayed, err := pay()
	if err != nil {
		return fmt.Errorf("pay again: %w", err)
	}
	if flag, ok := replayed.IdempotentReplayed.Get(); !ok || flag != rideapi.IdempotentReplayedTrue || replayed.Response.ID != paid.Response.ID {
		return fmt.Errorf("the retry was not a replay of %s", paid.Response.ID)
	}

	// 4. The receipt and the events, narrowed by their discriminator.
	listed, err := rider.ListReceipts(ctx, rideapi.ListReceiptsParams{TripID: tripID})
	if err != nil {
		return fmt.Errorf("receipts: %w", err)
	}
	receipts, ok := listed.(*rideapi.ReceiptListHeaders)
	if !ok || len(receipts.Response.Data) == 0 || receipts.Response.Data[0].Amount != fare.Total {
		return fmt.Errorf("receipts answered %T", listed)
	}
	eventsRes, err := admin.ListEvents(ctx, rideapi.ListEventsParams{Limit: rideapi.NewOptInt32(20), TripID: rideapi.NewOptString(tripID)})
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	events, ok := eventsRes.(*rideapi.EventListHeaders)
	if !ok {
		return fmt.Errorf("events answered %T", eventsRes)
	}
	var completedFare, succeededAmount int64
	for _, e := range events.Response.Data {
		switch e.Type {
		case rideapi.TripCompletedEventEvent:
			completedFare = e.TripCompletedEvent.Data.Fare.Total
		case rideapi.PaymentSucceededEventEvent:
			succeededAmount = e.PaymentSucceededEvent.Data.Amount
		}
	}
	if completedFare != fare.Total || succeededAmount != fare.Total {
		return fmt.Errorf("events of %s: trip.completed fare %d, payment.succeeded amount %d, want %d",
			tripID, completedFare, succeededAmount, fare.Total)
	}

	fmt.Printf("journey ok: %s %d %s, payment %s\n", tripID, fare.Total, fare.Currency, paid.Response.ID)
	return nil
}
