package tests

import (
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server"
)

var _ = ForEachEngine("A rider's journey", func(h *Harness) {
	It("goes estimate → ride → arriving → in_progress → completed → paid → receipt, with its events in order", func(ctx SpecContext) {
		city := h.NewCity(CityOpts{})
		h.NewDriver(DriverOpts{City: city.ID, North: 1_500})
		rider := h.NewRider()
		riderKey := h.Key(server.RoleRider, rider.ID)

		estimate := h.NewEstimate(riderKey, city)
		trip := h.BookTrip(riderKey, estimate.EstimateId)
		driverKey := h.Key(server.RoleDriver, trip.DriverSummary.Id)

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
})
