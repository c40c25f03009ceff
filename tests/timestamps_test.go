package tests

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server/auth"
)

// Timestamps are written as the document describes them: RFC 3339 in UTC, exact to the
// microsecond, the fraction without trailing zeros; REST and GraphQL write the same string.
var _ = ForEachEngine("Timestamps", func(h *Harness) {
	It("carry every microsecond and no trailing zero, in REST and GraphQL alike", func() {
		driver := h.NewDriver(DriverOpts{})
		rider := h.NewRider()
		created := time.Date(2026, 11, 24, 10, 15, 20, 540_000_000, time.UTC)
		pickup := time.Date(2026, 11, 24, 10, 16, 21, 0, time.UTC)
		trip := h.NewTrip(TripOpts{Driver: driver, Rider: rider, Status: "accepted", CreatedAt: created, PickupTime: pickup})

		rest := h.GET("/v1/trips/"+trip.ID, h.Admin).JSON()
		Expect(rest).To(HaveKeyWithValue("created_at", "2026-11-24T10:15:20.54Z"))
		Expect(rest).To(HaveKeyWithValue("pickup_time", "2026-11-24T10:16:21Z"))

		precise := h.NewTrip(TripOpts{Driver: h.NewDriver(DriverOpts{}), Rider: h.NewRider(), Status: "accepted",
			CreatedAt: time.Date(2026, 11, 24, 10, 15, 19, 31_910_000, time.UTC)})
		Expect(h.GET("/v1/trips/"+precise.ID, h.Admin).JSON()).To(HaveKeyWithValue("created_at", "2026-11-24T10:15:19.03191Z"))

		answer := h.Query(h.Key(auth.RoleAdmin, ""), `query($id: ID!) { trip(id: $id) { createdAt pickupTime } }`, map[string]any{"id": trip.ID})
		Expect(answer.Errors).To(BeEmpty())
		Expect(answer.Data).To(HaveKeyWithValue("trip", And(
			HaveKeyWithValue("createdAt", "2026-11-24T10:15:20.54Z"),
			HaveKeyWithValue("pickupTime", "2026-11-24T10:16:21Z"),
		)))
	})
})
