package tests

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/webhooks"
)

var _ = ForEachEngine("A rider's journey", func(h *Harness) {
	It("goes estimate → ride → arriving → in_progress → completed → paid → receipt, with its events in order", func(ctx SpecContext) {
		city := h.NewCity(CityOpts{})
		h.NewDriver(DriverOpts{City: city.ID, North: 1_500})
		rider := h.NewRider()
		riderKey := h.Key(auth.RoleRider, rider.ID)

		estimate := h.NewEstimate(riderKey, city)
		trip := h.BookTrip(riderKey, estimate.EstimateId)
		driverKey := h.Key(auth.RoleDriver, trip.DriverSummary.Id)

		for _, status := range []string{"arriving", "in_progress", "completed"} {
			res := h.PutStatus(driverKey, trip.Id, status, nil)
			Expect(res.Status).To(Equal(http.StatusOK), "%s: %s", status, res.Body)
		}

		var done gen.Trip
		h.GET("/v1/trips/"+trip.Id, riderKey).Decode(&done)
		Expect(done.Status).To(Equal(gen.TripStatus("completed")))
		Expect(done.CompletedAt).NotTo(BeNil())
		Expect(*done.Fare).To(Equal(gen.Money{Total: estimate.PriceRange.Max, Currency: estimate.PriceRange.Currency}))
		Expect(done.PickupTime.After(*done.CreatedAt)).To(BeTrue())
		Expect(h.EventTypes(trip.Id)).To(Equal([]string{"trip.created", "trip.arriving", "trip.started", "trip.completed"}))

		// The rider pays the upfront fare once and gets a receipt that adds up.
		pay := h.Do(Request{Method: http.MethodPost, Path: "/v1/payments", Key: riderKey,
			Header: map[string]string{"Idempotency-Key": newIdempotencyKey()},
			Body:   map[string]any{"trip_id": trip.Id, "amount": done.Fare.Total, "currency": done.Fare.Currency, "payment_method": "pm_card_visa"}})
		Expect(pay.Status).To(Equal(http.StatusCreated), "%s", pay.Body)
		Expect(pay.Header.Get("Location")).To(Equal("/v1/trips/" + trip.Id + "/payment"))
		var payment gen.Payment
		h.GET(pay.Header.Get("Location"), riderKey).Decode(&payment)
		Expect(payment.Amount).To(Equal(done.Fare.Total))
		var receipts gen.ReceiptList
		h.GET("/v1/receipts?trip_id="+trip.Id, riderKey).Decode(&receipts)
		Expect(receipts.Data).To(HaveLen(1))
		var sum int64
		for _, item := range receipts.Data[0].LineItems {
			sum += item.Amount
		}
		Expect(sum).To(Equal(done.Fare.Total))
		Expect(h.EventTypes(trip.Id)).To(Equal([]string{"trip.created", "trip.arriving", "trip.started", "trip.completed", "payment.succeeded"}))

		// The driver is free again, where the ride ended, and takes the next booking.
		driver, err := h.Store.DriverByID(ctx, trip.DriverSummary.Id)
		Expect(err).NotTo(HaveOccurred())
		Expect(driver.Available).To(BeTrue())
		Expect(driver.Lat).To(Equal(done.Dropoff.Lat))
		next := h.BookTrip(riderKey, h.NewEstimate(riderKey, city).EstimateId)
		Expect(next.DriverSummary.Id).To(Equal(trip.DriverSummary.Id))
	})

	It("tells a partner's receiver that the trip completed, signed, and counts the delivery", func() {
		receiver := NewReceiver(nil)
		_, secret := h.RegisterEndpoint(receiver.URL, "trip.completed")
		city := h.NewCity(CityOpts{})
		h.NewDriver(DriverOpts{City: city.ID, North: 1_500})
		riderKey := h.Key(auth.RoleRider, h.NewRider().ID)
		trip := h.BookTrip(riderKey, h.NewEstimate(riderKey, city).EstimateId)
		for _, status := range []string{"in_progress", "completed"} {
			Expect(h.PutStatus(h.Admin, trip.Id, status, nil).Status).To(Equal(http.StatusOK))
		}
		events, err := h.Store.EventsBySubject(context.Background(), trip.Id)
		Expect(err).NotTo(HaveOccurred())
		completed := events[len(events)-1]
		Expect(completed.Type).To(Equal("trip.completed"))

		Eventually(func() []Call { return receiver.CallsFor(completed.ID) }).
			WithTimeout(10 * time.Second).WithPolling(20 * time.Millisecond).Should(HaveLen(1))
		call := receiver.CallsFor(completed.ID)[0]
		Expect(call.Header.Get("X-Ride-Event")).To(Equal("trip.completed"))
		Expect(webhooks.Verify(call.Body, call.Header.Get("X-Ride-Signature"), []string{secret}, 0)).To(Succeed())
		var body struct {
			Type string `json:"type"`
			Data struct {
				TripID string    `json:"trip_id"`
				Fare   gen.Money `json:"fare"`
			} `json:"data"`
		}
		Expect(json.Unmarshal(call.Body, &body)).To(Succeed())
		Expect(body.Data.TripID).To(Equal(trip.Id))
		Expect(body.Data.Fare).To(Equal(*trip.Fare))

		// The metrics page is outside the document; read it as a scraper would. The worker
		// counts an attempt once it has recorded it, just after the receiver answered.
		metrics := func() string {
			res, err := http.Get(h.URL + "/metrics")
			Expect(err).NotTo(HaveOccurred())
			defer res.Body.Close()
			page, _ := io.ReadAll(res.Body)
			return string(page)
		}
		Eventually(metrics).WithTimeout(5 * time.Second).
			Should(MatchRegexp(`ride_webhook_deliveries_total\{outcome="delivered"\} [1-9]`))
	})
})
