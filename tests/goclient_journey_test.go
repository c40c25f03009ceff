package tests

import (
	"context"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/auth"
)

// A partner's whole journey through the generated Go client, typed end to end: no body is
// decoded by hand. Estimate, book, move the trip with If-Match, pay with an Idempotency-Key
// and replay it, read the receipt and the events (narrowed by their discriminator).
var _ = ForEachEngine("The generated Go client, a partner's whole journey", func(h *Harness) {
	as := func(key string) *gen.ClientWithResponses {
		c, err := gen.NewClientWithResponses(h.URL, gen.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+key)
			return nil
		}))
		Expect(err).NotTo(HaveOccurred())
		return c
	}

	It("estimates, books, moves, pays and replays, and reads the receipt and the events", func(ctx SpecContext) {
		city := h.NewCity(CityOpts{})
		h.NewDriver(DriverOpts{City: city.ID})
		rider := as(h.Key(auth.RoleRider, h.NewRider().ID))
		admin := as(h.Admin)

		origin, destination := loc(city, 500, 500), loc(city, -2_000, 1_000)
		estimate, err := rider.CreateFareEstimateWithResponse(ctx, &gen.CreateFareEstimateParams{}, gen.FareEstimateRequest{
			Origin:      gen.LocationInput{Lat: origin["lat"].(float64), Lng: origin["lng"].(float64)},
			Destination: gen.LocationInput{Lat: destination["lat"].(float64), Lng: destination["lng"].(float64)},
			RideType:    gen.RideType("economy"),
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(estimate.JSON201).NotTo(BeNil(), "%s", estimate.Body)

		booked, err := rider.CreateRideWithResponse(ctx, &gen.CreateRideParams{IdempotencyKey: newIdempotencyKey()},
			gen.RideRequest{EstimateId: estimate.JSON201.EstimateId})
		Expect(err).NotTo(HaveOccurred())
		Expect(booked.JSON201).NotTo(BeNil(), "%s", booked.Body)
		trip := *booked.JSON201
		Expect(trip.DriverSummary).NotTo(BeNil())

		key, err := admin.CreateApiKeyWithResponse(ctx, &gen.CreateApiKeyParams{},
			gen.ApiKeyCreate{Role: gen.ApiKeyRole("driver"), Subject: &trip.DriverSummary.Id})
		Expect(err).NotTo(HaveOccurred())
		Expect(key.JSON201).NotTo(BeNil(), "%s", key.Body)
		driver := as(key.JSON201.Secret)

		read, err := driver.GetTripWithResponse(ctx, trip.Id, &gen.GetTripParams{})
		Expect(err).NotTo(HaveOccurred())
		Expect(read.JSON200).NotTo(BeNil(), "%s", read.Body)
		etag := gen.IfMatch(read.HTTPResponse.Header.Get("ETag"))
		moved, err := driver.UpdateTripWithResponse(ctx, trip.Id, &gen.UpdateTripParams{IfMatch: &etag}, gen.TripUpdate{Status: "arriving"})
		Expect(err).NotTo(HaveOccurred())
		Expect(moved.JSON200).NotTo(BeNil(), "%s", moved.Body)
		stale, err := driver.UpdateTripWithResponse(ctx, trip.Id, &gen.UpdateTripParams{IfMatch: &etag}, gen.TripUpdate{Status: "in_progress"})
		Expect(err).NotTo(HaveOccurred())
		Expect(stale.ApplicationproblemJSON412).NotTo(BeNil(), "%s", stale.Body)
		Expect(stale.ApplicationproblemJSON412.Code).To(Equal("precondition_failed"))
		for _, status := range []gen.TripStatus{"in_progress", "completed"} {
			moved, err := driver.UpdateTripWithResponse(ctx, trip.Id, &gen.UpdateTripParams{}, gen.TripUpdate{Status: status})
			Expect(err).NotTo(HaveOccurred())
			Expect(moved.JSON200).NotTo(BeNil(), "%s", moved.Body)
			Expect(moved.JSON200.Status).To(Equal(status))
		}
		done, err := rider.GetTripWithResponse(ctx, trip.Id, &gen.GetTripParams{})
		Expect(err).NotTo(HaveOccurred())
		Expect(done.JSON200).NotTo(BeNil(), "%s", done.Body)
		fare := done.JSON200.Fare

		payKey := newIdempotencyKey()
		pay := func() *gen.CreatePaymentResponse {
			res, err := rider.CreatePaymentWithResponse(ctx, &gen.CreatePaymentParams{IdempotencyKey: payKey}, gen.PaymentCreate{
				TripId: trip.Id, Amount: fare.Total, Currency: fare.Currency, PaymentMethod: "pm_card_visa",
			})
			Expect(err).NotTo(HaveOccurred())
			Expect(res.JSON201).NotTo(BeNil(), "%s", res.Body)
			return res
		}
		paid, replay := pay(), pay()
		Expect(replay.JSON201.Id).To(Equal(paid.JSON201.Id))
		Expect(replay.HTTPResponse.Header.Get("Idempotent-Replayed")).To(Equal("true"))

		receipts, err := rider.ListReceiptsWithResponse(ctx, &gen.ListReceiptsParams{TripId: gen.TripIdQuery(trip.Id)})
		Expect(err).NotTo(HaveOccurred())
		Expect(receipts.JSON200).NotTo(BeNil(), "%s", receipts.Body)
		Expect(receipts.JSON200.Data).To(HaveLen(1))
		Expect(receipts.JSON200.Data[0].Amount).To(Equal(fare.Total))

		limit := gen.Limit(100)
		events, err := admin.ListEventsWithResponse(ctx, &gen.ListEventsParams{Limit: &limit})
		Expect(err).NotTo(HaveOccurred())
		Expect(events.JSON200).NotTo(BeNil(), "%s", events.Body)
		var completed *gen.TripCompletedEvent
		var succeeded *gen.PaymentSucceededEvent
		for _, e := range events.JSON200.Data {
			v, err := e.ValueByDiscriminator()
			Expect(err).NotTo(HaveOccurred())
			switch v := v.(type) {
			case gen.TripCompletedEvent:
				if v.Data.TripId == trip.Id {
					completed = &v
				}
			case gen.PaymentSucceededEvent:
				if v.Data.TripId == trip.Id {
					succeeded = &v
				}
			}
		}
		Expect(completed).NotTo(BeNil(), "the trip's trip.completed event")
		Expect(completed.Data.Fare.Total).To(Equal(fare.Total), "the fare survives decoding")
		Expect(succeeded).NotTo(BeNil(), "the trip's payment.succeeded event")
		Expect(succeeded.Data.Amount).To(Equal(fare.Total))
	})
})
