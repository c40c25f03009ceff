package tests

import (
	"encoding/json"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/rideapi/ride/server/auth"
)

// Internal data that no public view may show, by member name and by the values the factories
// plant in it. The harness checks every response of every spec against both.
var (
	hiddenMembers = []string{"route_polyline", "matching_score", "driver_payout", "platform_cost",
		"default_payment_token", "payment_token", "payment_method_token", "cost_basis", "provider_ref"}
	// ch_sim_ starts the simulated provider's charge references, which stay internal.
	hiddenValues = []string{"SECRET_POLYLINE", "tok_SECRET_PAYMENT_TOKEN", "0.987654", "ch_sim_"}
)

// leaks scans a body recursively for hidden members and values.
func leaks(body []byte) error {
	for _, v := range hiddenValues {
		if strings.Contains(string(body), v) {
			return fmt.Errorf("hidden value %q in body", v)
		}
	}
	var doc any
	if json.Unmarshal(body, &doc) != nil {
		return nil
	}
	var scan func(path string, v any) error
	scan = func(path string, v any) error {
		switch t := v.(type) {
		case map[string]any:
			for k, child := range t {
				for _, hidden := range hiddenMembers {
					if k == hidden {
						return fmt.Errorf("hidden member %s.%s", path, k)
					}
				}
				if err := scan(path+"."+k, child); err != nil {
					return err
				}
			}
		case []any:
			for i, child := range t {
				if err := scan(fmt.Sprintf("%s[%d]", path, i), child); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return scan("$", doc)
}

var _ = ForEachEngine("Hidden internal data", func(h *Harness) {
	It("never appears in any view, for any role", func() {
		driver := h.NewDriver(DriverOpts{})
		rider := h.NewRider()
		trip := h.NewTrip(TripOpts{Driver: driver, Rider: rider})
		for _, key := range []string{h.Admin, h.Key(auth.RoleRider, rider.ID), h.Key(auth.RoleDriver, driver.ID)} {
			for _, path := range []string{
				"/v1/trips/" + trip.ID, "/v1/trips?limit=100", "/v1/trips?city=" + driver.City,
				"/v1/drivers/" + driver.ID, "/v1/drivers/" + driver.ID + "/trips", "/v1/riders/" + rider.ID,
			} {
				res := h.GET(path, key)
				Expect(leaks(res.Body)).To(Succeed(), path)
			}
		}
	})

	It("is caught by the scanner when present", func() {
		Expect(leaks([]byte(`{"data":[{"fare":{"driver_payout":1}}]}`))).To(MatchError(ContainSubstring("driver_payout")))
		Expect(leaks([]byte(`{"x":"SECRET_POLYLINE_abc"}`))).NotTo(Succeed())
	})
})
