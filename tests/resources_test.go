package tests

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/store"
)

var _ = ForEachEngine("Reading one resource", func(h *Harness) {
	var (
		driver store.Driver
		rider  store.Rider
		trip   store.Trip
	)
	BeforeEach(func() {
		driver = h.NewDriver(DriverOpts{})
		rider = h.NewRider()
		trip = h.NewTrip(TripOpts{Driver: driver, Rider: rider})
	})

	Describe("GET /v1/trips/{tripId}", func() {
		It("returns the full public view to the rider, the driver and admin", func() {
			for _, key := range []string{h.Admin, h.Key(auth.RoleRider, rider.ID), h.Key(auth.RoleDriver, driver.ID)} {
				res := h.GET("/v1/trips/"+trip.ID, key)
				Expect(res.Status).To(Equal(200))
				var got gen.Trip
				res.Decode(&got)
				Expect(got.Id).To(Equal(trip.ID))
				Expect(string(got.Status)).To(Equal("completed"))
				Expect(got.DriverSummary.Id).To(Equal(driver.ID))
				Expect(got.DriverSummary.Name).To(Equal(driver.Name))
				Expect(got.Fare.Total).To(Equal(trip.FareTotal))
				Expect(got.Fare.Currency).To(Equal("usd"))
				Expect(got.CreatedAt.Equal(trip.CreatedAt)).To(BeTrue())
				Expect(got.CompletedAt).NotTo(BeNil())
				Expect(*got.RiderId).To(Equal(rider.ID))
			}
		})

		It("serves timestamps in UTC with microsecond precision", func() {
			body := h.GET("/v1/trips/"+trip.ID, h.Admin).JSON()
			Expect(body["created_at"]).To(MatchRegexp(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z$`))
		})

		It("answers 403 to another rider of the account, 404 to a driver who does not drive it and when absent", func() {
			other := h.NewRider()
			res := h.GET("/v1/trips/"+trip.ID, h.Key(auth.RoleRider, other.ID))
			Expect(res.Status).To(Equal(403))
			Expect(res.Problem().Code).To(Equal("forbidden"))
			Expect(h.GET("/v1/trips/"+trip.ID, h.Key(auth.RoleDriver, h.NewDriver(DriverOpts{}).ID)).Status).To(Equal(404))
			res = h.GET("/v1/trips/trp_aaaaaaaaaaaaaaaaaaaaaaaaaa", h.Admin)
			Expect(res.Status).To(Equal(404))
			Expect(res.Problem().Code).To(Equal("not_found"))
			Expect(h.GET("/v1/trips/trp_"+repeat("a", 500), h.Admin).Status).To(Equal(404), "over-long ids are 404")
		})

		It("answers 401 without a key", func() {
			Expect(h.GET("/v1/trips/"+trip.ID, "").Status).To(Equal(401))
		})

		It("returns a sparse trip with fields", func() {
			body := h.GET("/v1/trips/"+trip.ID+"?fields=fare,driver_summary", h.Admin).JSON()
			Expect(body).To(HaveLen(4))
			Expect(body).To(HaveKey("driver_summary"))
			Expect(body).To(HaveKey("fare"))
		})
	})

	Describe("GET /v1/drivers/{driverId}", func() {
		It("shows the public profile to anyone authenticated, cacheable for a minute", func() {
			res := h.GET("/v1/drivers/"+driver.ID, h.Key(auth.RoleRider, rider.ID))
			Expect(res.Status).To(Equal(200))
			Expect(res.Header.Get("Cache-Control")).To(Equal("private, max-age=60"))
			var got gen.Driver
			res.Decode(&got)
			Expect(got.Id).To(Equal(driver.ID))
			Expect(got.Vehicle.Plate).To(Equal(driver.VehiclePlate))
			Expect(got.City).To(Equal(driver.City))
			Expect(res.JSON()).NotTo(HaveKey("lat"), "the driver's position is internal")
		})
		It("answers 404 for an unknown driver and 401 without a key", func() {
			Expect(h.GET("/v1/drivers/drv_aaaaaaaaaaaaaaaaaaaaaaaaaa", h.Admin).Status).To(Equal(404))
			Expect(h.GET("/v1/drivers/whatever", h.Admin).Status).To(Equal(404))
			Expect(h.GET("/v1/drivers/"+driver.ID, "").Status).To(Equal(401))
		})
	})

	Describe("GET /v1/riders/{riderId}", func() {
		It("shows the rider to themself and admin, 403 to anyone else", func() {
			for _, key := range []string{h.Admin, h.Key(auth.RoleRider, rider.ID)} {
				res := h.GET("/v1/riders/"+rider.ID, key)
				Expect(res.Status).To(Equal(200))
				var got gen.Rider
				res.Decode(&got)
				Expect(got.Id).To(Equal(rider.ID))
				Expect(got.Name).To(Equal(rider.Name))
			}
			Expect(h.GET("/v1/riders/"+rider.ID, h.Key(auth.RoleRider, h.NewRider().ID)).Status).To(Equal(403))
			Expect(h.GET("/v1/riders/"+rider.ID, h.Key(auth.RoleDriver, driver.ID)).Status).To(Equal(403))
			Expect(h.GET("/v1/riders/rdr_aaaaaaaaaaaaaaaaaaaaaaaaaa", h.Admin).Status).To(Equal(404))
			Expect(h.GET("/v1/riders/"+rider.ID, "").Status).To(Equal(401))
		})
	})
})

func repeat(s string, n int) string {
	out := make([]byte, 0, len(s)*n)
	for range n {
		out = append(out, s...)
	}
	return string(out)
}
