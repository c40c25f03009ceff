package tests

import (
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server"
)

var _ = ForEachEngine("A rider's journey", func(h *Harness) {
	It("goes estimate → ride → arriving → in_progress → completed, with its events in order", func(ctx SpecContext) {
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

		// The driver is free again, where the ride ended, and takes the next booking.
		driver, err := h.Store.DriverByID(ctx, trip.DriverSummary.Id)
		Expect(err).NotTo(HaveOccurred())
		Expect(driver.Available).To(BeTrue())
		Expect(driver.Lat).To(Equal(done.Dropoff.Lat))
		next := h.BookTrip(riderKey, h.NewEstimate(riderKey, city).EstimateId)
		Expect(next.DriverSummary.Id).To(Equal(trip.DriverSummary.Id))
	})
})
