package tests

import (
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/rideapi/ride/server/auth"
)

var _ = ForEachEngine("Conditional requests", func(h *Harness) {
	var paths []string
	var riderKey string
	BeforeEach(func() {
		driver := h.NewDriver(DriverOpts{})
		rider := h.NewRider()
		riderKey = h.Key(auth.RoleRider, rider.ID)
		trip := h.NewTrip(TripOpts{Driver: driver, Rider: rider})
		paths = []string{
			"/v1/trips/" + trip.ID, "/v1/trips?city=" + driver.City, "/v1/drivers/" + driver.ID,
			"/v1/drivers/" + driver.ID + "/trips", "/v1/riders/" + rider.ID,
		}
	})

	It("answers 304 without a body when If-None-Match matches, on resources and lists", func() {
		for _, path := range paths {
			first := h.GET(path, h.Admin)
			Expect(first.Status).To(Equal(200))
			etag := first.Header.Get("ETag")
			Expect(etag).To(MatchRegexp(`^"[0-9a-f]{16}"$`), path)
			Expect(first.Header.Get("Vary")).To(Equal("Authorization"))
			Expect(first.Header.Get("Cache-Control")).To(HavePrefix("private"))

			again := h.Do(Request{Method: http.MethodGet, Path: path, Key: h.Admin, Header: map[string]string{"If-None-Match": etag}})
			Expect(again.Status).To(Equal(304), path)
			Expect(again.Body).To(BeEmpty())
			Expect(again.Header.Get("ETag")).To(Equal(etag))

			weak := h.Do(Request{Method: http.MethodGet, Path: path, Key: h.Admin, Header: map[string]string{"If-None-Match": `"other", W/` + etag}})
			Expect(weak.Status).To(Equal(304), "If-None-Match uses the weak comparison")

			stale := h.Do(Request{Method: http.MethodGet, Path: path, Key: h.Admin, Header: map[string]string{"If-None-Match": `"stale"`}})
			Expect(stale.Status).To(Equal(200))
			Expect(stale.Body).To(Equal(first.Body))
		}
	})

	It("gives another caller another representation's ETag where the view differs", func() {
		driver := h.NewDriver(DriverOpts{})
		h.NewTrip(TripOpts{Driver: driver, Rider: h.NewRider()})
		paths[1] = "/v1/trips?city=" + driver.City
		admin := h.GET(paths[1], h.Admin)
		rider := h.GET(paths[1], riderKey)
		Expect(rider.Header.Get("ETag")).NotTo(Equal(admin.Header.Get("ETag")))
	})

	It("answers HEAD like GET without the body", func() {
		for _, path := range paths {
			get := h.GET(path, h.Admin)
			head := h.Do(Request{Method: http.MethodHead, Path: path, Key: h.Admin})
			Expect(head.Status).To(Equal(200))
			Expect(head.Body).To(BeEmpty())
			Expect(head.Header.Get("ETag")).To(Equal(get.Header.Get("ETag")))
		}
	})
})
