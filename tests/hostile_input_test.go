package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/rideapi/ride/server/auth"
)

// expectField checks a 400 problem of code that names location in errors[].
func expectField(res *Response, code, location string) {
	GinkgoHelper()
	Expect(res.Status).To(Equal(http.StatusBadRequest), "%s", res.Body)
	p := res.Problem()
	Expect(p.Code).To(Equal(code), "%s", res.Body)
	Expect(p.Errors).NotTo(BeNil(), "%s", res.Body)
	var locations []string
	for _, e := range *p.Errors {
		locations = append(locations, e.Location)
	}
	Expect(locations).To(ContainElement(location), "%s", res.Body)
}

var _ = ForEachEngine("Hostile input", func(h *Harness) {
	var city string
	BeforeEach(func() { city = h.NewCity(CityOpts{}).ID })

	estimate := func(mutate func(body map[string]any)) map[string]any {
		body := map[string]any{
			"origin":      map[string]any{"lat": 0.0, "lng": 0.0, "address": "1 Market St"},
			"destination": map[string]any{"lat": 0.0, "lng": 0.0},
			"ride_type":   "economy",
		}
		if mutate != nil {
			mutate(body)
		}
		return body
	}

	Describe("text that is not UTF-8 or holds a NUL", func() {
		It("is refused in queries and paths with 400 naming the parameter", func() {
			driver := h.NewDriver(DriverOpts{City: city})
			expectField(h.GET("/v1/trips?city=lon%00don", h.Admin), "invalid_request", "query.city")
			expectField(h.GET("/v1/trips?city=%ff%fe", h.Admin), "invalid_request", "query.city")
			expectField(h.GET("/v1/drivers/"+driver.ID+"/trips?city=%00", h.Admin), "invalid_request", "query.city")
			expectField(h.Do(Request{Method: http.MethodPost, Path: "/v1/webhook-endpoints/%00/secret-rotations", Key: h.Admin}),
				"invalid_request", "path.endpointId")
			expectField(h.GET("/v1/trips/trp_%ff", h.Admin), "invalid_request", "path.tripId")
			expectField(h.GET("/v1/graphql?query=%7B%00%7D", h.Admin), "invalid_request", "query.query")
		})

		It("is refused in bodies with 400 naming the member, and nothing is written", func() {
			rider := h.NewRider()
			key := h.Key(auth.RoleRider, rider.ID)
			trip := h.NewTrip(TripOpts{Driver: h.NewDriver(DriverOpts{City: city}), Rider: rider, Status: "accepted"})

			res := h.Do(Request{Method: http.MethodPost, Path: "/v1/trips/" + trip.ID + "/cancellations", Key: key,
				Body: map[string]any{"reason": "nul\u0000inside"}})
			expectField(res, "invalid_request", "body.reason")
			Expect(h.GET("/v1/trips/"+trip.ID, key).JSON()["status"]).To(Equal("accepted"))

			res = h.Do(Request{Method: http.MethodPost, Path: "/v1/fare-estimates", Key: key,
				Body: estimate(func(b map[string]any) { b["origin"].(map[string]any)["address"] = "\u0000" })})
			expectField(res, "invalid_request", "body.origin.address")

			res = h.Do(Request{Method: http.MethodPost, Path: "/v1/webhook-endpoints", Key: h.Admin, Body: map[string]any{
				"url": "https://partner.example.com/hooks", "events": []string{"trip.completed"}, "description": "a\u0000b"}})
			expectField(res, "invalid_request", "body.description")

			// Bytes that are not UTF-8 at all are not JSON text.
			res = h.Do(Request{Method: http.MethodPost, Path: "/v1/trips/" + trip.ID + "/cancellations", Key: key,
				Body: []byte("{\"reason\":\"\xff\xfe\"}")})
			ExpectProblem(res, http.StatusBadRequest, "malformed_json")
		})
	})

	Describe("JSON", func() {
		valid := func() []byte {
			b, err := json.Marshal(estimate(nil))
			Expect(err).NotTo(HaveOccurred())
			return b
		}
		It("is exactly one value: anything after it is malformed_json", func() {
			for _, body := range [][]byte{
				append(valid(), []byte(` {"x":1}`)...),
				append(valid(), []byte(`]]]`)...),
				[]byte(`{"a":1}}`),
				append(valid(), []byte(`x`)...),
			} {
				ExpectProblem(h.Do(Request{Method: http.MethodPost, Path: "/v1/fare-estimates", Key: h.Admin, Body: body}),
					http.StatusBadRequest, "malformed_json")
			}
			// Whitespace after the value is fine.
			res := h.Do(Request{Method: http.MethodPost, Path: "/v1/fare-estimates", Key: h.Admin, Body: append(valid(), []byte(" \n\t")...)})
			Expect(res.Status).NotTo(Equal(http.StatusBadRequest), "%s", res.Body)
		})

		It("refuses a member given twice, naming it", func() {
			body := bytes.Replace(valid(), []byte(`"ride_type":"economy"`), []byte(`"ride_type":"economy","ride_type":"xl"`), 1)
			expectField(h.Do(Request{Method: http.MethodPost, Path: "/v1/fare-estimates", Key: h.Admin, Body: body}),
				"malformed_json", "body.ride_type")
			nested := bytes.Replace(valid(), []byte(`"lat":0,`), []byte(`"lat":0,"lat":1,`), 1)
			expectField(h.Do(Request{Method: http.MethodPost, Path: "/v1/fare-estimates", Key: h.Admin, Body: nested}),
				"malformed_json", "body.destination.lat")
		})
	})

	It("serves a body of exactly 1,048,576 bytes and refuses one byte more with 413", func() {
		center := h.NewCity(CityOpts{})
		body := estimateBody(center, "economy")
		data, err := json.Marshal(body)
		Expect(err).NotTo(HaveOccurred())
		pad := func(size int) []byte {
			return append(append(data[:len(data)-1:len(data)-1], bytes.Repeat([]byte(" "), size-len(data))...), '}')
		}
		res := h.Do(Request{Method: http.MethodPost, Path: "/v1/fare-estimates", Key: h.Admin, Body: pad(1 << 20)})
		Expect(res.Status).To(Equal(http.StatusCreated), "%s", res.Body)
		ExpectProblem(h.Do(Request{Method: http.MethodPost, Path: "/v1/fare-estimates", Key: h.Admin, Body: pad(1<<20 + 1)}),
			http.StatusRequestEntityTooLarge, "body_too_large")
	})

	It("refuses a query string that does not parse instead of ignoring it", func() {
		var q strings.Builder
		q.WriteString("/v1/trips?status=cancelled&fields=status")
		for i := range 10_001 {
			fmt.Fprintf(&q, "&p%d=1", i)
		}
		res := h.GET(q.String(), h.Admin)
		expectField(res, "invalid_request", "query")
		Expect(*res.Problem().Detail).To(ContainSubstring("too many parameters"))
		expectField(h.GET("/v1/trips?status=%zz", h.Admin), "invalid_request", "query")
	})

	It("words refusals for clients: no package prefixes, every repeated parameter named", func() {
		res := h.GET("/v1/trips?sort=fare,-fare", h.Admin)
		expectField(res, "invalid_request", "query.sort")
		Expect(*res.Problem().Detail).NotTo(ContainSubstring("ride:"))
		Expect(*res.Problem().Detail).To(HavePrefix(`Invalid sort "-fare": field sorted on more than once`))

		expectField(h.GET("/v1/trips?sort=created_at&sort=-created_at", h.Admin), "invalid_request", "query.sort")
		expectField(h.GET("/v1/trips?limit=1&limit=2", h.Admin), "invalid_request", "query.limit")
		expectField(h.GET("/v1/trips?status=completed&status=cancelled", h.Admin), "invalid_request", "query.status")
		expectField(h.Do(Request{Method: http.MethodPost, Path: "/v1/webhook-endpoints", Key: h.Admin, Body: map[string]any{
			"url": "https://partner.example.com/hooks", "events": []string{"trip.completed", "trip.completed"}}}),
			"invalid_request", "body.events")
	})

	It("marks every answer on the deprecated alias, from an escaped path", func() {
		for _, req := range []Request{
			{Method: http.MethodGet, Path: "/v1/webhook_endpoints/%00", Key: h.Admin},
			{Method: http.MethodGet, Path: "/v1/webhook_endpoints/whe_nope", Key: h.Admin},
			{Method: http.MethodGet, Path: "/v1/webhook_endpoints", Key: ""},
			{Method: http.MethodPost, Path: "/v1/webhook_endpoints", Key: h.Admin, Body: bytes.Repeat([]byte(" "), 1<<20+1)},
		} {
			res := h.Do(req)
			Expect(res.Status).To(BeNumerically(">=", 400), req.Path)
			Expect(res.Header.Get("Deprecation")).To(Equal("@1795219200"), req.Path)
			Expect(res.Header.Get("Link")).To(HavePrefix("</v1/webhook-endpoints"), req.Path)
			Expect(res.Header.Get("Link")).NotTo(ContainSubstring("\x00"), req.Path)
		}
		Expect(h.GET("/v1/webhook_endpoints/%00", h.Admin).Header.Get("Link")).To(Equal(`</v1/webhook-endpoints/%00>; rel="successor-version"`))
	})
})
