package tests

import (
	"context"
	"net/http"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/gen"
)

// The typed Go client in gen/client.gen.go is generated from the published document, the
// way a consumer would generate theirs. Driving the server with it proves the document is
// good enough to build a working client from.
var _ = ForEachEngine("The generated Go client", func(h *Harness) {
	var client *gen.ClientWithResponses

	BeforeEach(func() {
		var err error
		client, err = gen.NewClientWithResponses(h.URL, gen.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+h.Admin)
			return nil
		}))
		Expect(err).NotTo(HaveOccurred())
	})

	It("lists trips, follows the cursor to the end, and reads a trip's driver", func(ctx SpecContext) {
		driver := h.NewDriver(DriverOpts{})
		rider := h.NewRider()
		var want []string
		for range 5 {
			want = append(want, h.NewTrip(TripOpts{Driver: driver, Rider: rider}).ID)
		}
		slices.Reverse(want) // newest first

		var got []string
		limit, city := gen.Limit(2), gen.City(driver.City)
		params := &gen.ListTripsParams{Limit: &limit, City: &city}
		for pages := 1; ; pages++ {
			Expect(pages).To(BeNumerically("<=", 3))
			res, err := client.ListTripsWithResponse(ctx, params)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.StatusCode()).To(Equal(200), "%s", res.Body)
			Expect(res.JSON200).NotTo(BeNil())
			Expect(res.Headers200.ETag).NotTo(BeEmpty())
			for _, trip := range res.JSON200.Data {
				got = append(got, trip.Id)
				Expect(trip.DriverSummary).NotTo(BeNil())
				Expect(trip.DriverSummary.Id).To(Equal(driver.ID))
			}
			Expect(res.JSON200.Pagination.Count).To(BeEquivalentTo(len(res.JSON200.Data)))
			if res.JSON200.Pagination.NextCursor == nil {
				Expect(res.JSON200.Pagination.HasMore).To(BeFalse())
				break
			}
			params.Cursor = res.JSON200.Pagination.NextCursor
		}
		Expect(got).To(Equal(want))

		profile, err := client.GetDriverWithResponse(ctx, driver.ID, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(profile.StatusCode()).To(Equal(200))
		Expect(profile.JSON200.Id).To(Equal(driver.ID))
		Expect(profile.JSON200.Name).To(Equal(driver.Name))
		Expect(profile.JSON200.Vehicle.Plate).To(Equal(driver.VehiclePlate))
	})

	It("decodes problems into typed errors", func(ctx SpecContext) {
		limit := gen.Limit(500)
		res, err := client.ListTripsWithResponse(ctx, &gen.ListTripsParams{Limit: &limit})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.StatusCode()).To(Equal(400))
		Expect(res.ApplicationproblemJSON400).NotTo(BeNil())
		Expect(res.ApplicationproblemJSON400.Code).To(Equal("invalid_limit"))

		missing, err := client.GetDriverWithResponse(ctx, "drv_nosuchdriver000000000000000", nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(missing.StatusCode()).To(Equal(404))
		Expect(missing.ApplicationproblemJSON404.Code).To(Equal("not_found"))
	})
})
