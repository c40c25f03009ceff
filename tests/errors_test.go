package tests

import (
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = ForEachEngine("The error boundary", func(h *Harness) {
	It("answers unknown routes with a 404 problem", func() {
		res := h.GET("/v1/nothing-here", h.Admin)
		Expect(res.Status).To(Equal(404))
		p := res.Problem()
		Expect(p.Code).To(Equal("not_found"))
		Expect(p.Type).To(Equal("/docs/problems#not_found"))
		Expect(p.RequestId).To(Equal(res.Header.Get("X-Request-Id")))
		Expect(h.GET("/", "").Status).To(Equal(404))
	})

	It("answers a wrong method with 405 and Allow", func() {
		res := h.Do(Request{Method: http.MethodDelete, Path: "/v1/trips", Key: h.Admin})
		Expect(res.Status).To(Equal(405))
		Expect(res.Problem().Code).To(Equal("method_not_allowed"))
		Expect(res.Header.Get("Allow")).To(ContainSubstring("GET"))
	})

	It("answers 406 when Accept admits no JSON", func() {
		res := h.Do(Request{Method: http.MethodGet, Path: "/v1/trips", Key: h.Admin, Header: map[string]string{"Accept": "text/html"}})
		Expect(res.Status).To(Equal(406))
		Expect(res.Problem().Code).To(Equal("not_acceptable"))
		ok := h.Do(Request{Method: http.MethodGet, Path: "/v1/trips?limit=1", Key: h.Admin, Header: map[string]string{"Accept": "text/html, application/*;q=0.5"}})
		Expect(ok.Status).To(Equal(200))
	})

	It("names every invalid parameter at once", func() {
		res := h.GET("/v1/trips?limit=0&status=lost&colour=red", h.Admin)
		Expect(res.Status).To(Equal(400))
		p := res.Problem()
		Expect(p.Code).To(Equal("invalid_request"))
		var locations []string
		for _, e := range *p.Errors {
			locations = append(locations, e.Location)
		}
		Expect(locations).To(ContainElements("query.colour"))
	})

	It("gives every response its own request id", func() {
		a := h.GET("/healthz", "")
		b := h.GET("/healthz", "")
		Expect(a.Header.Get("X-Request-Id")).NotTo(Equal(b.Header.Get("X-Request-Id")))
	})
})
