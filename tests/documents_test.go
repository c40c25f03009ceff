package tests

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"gopkg.in/yaml.v3"

	"github.com/rideapi/ride/openapi"
)

var _ = ForEachEngine("Published documents and probes", func(h *Harness) {
	It("publishes the OpenAPI document as JSON and YAML without credentials", func() {
		res := h.GET("/v1/openapi.json", "")
		Expect(res.Status).To(Equal(200))
		doc := res.JSON()
		Expect(doc["openapi"]).To(Equal("3.0.3"))
		Expect(doc["paths"]).To(HaveKey("/v1/trips"))

		res = h.GET("/v1/openapi.yaml", "")
		Expect(res.Status).To(Equal(200))
		Expect(res.Header.Get("Content-Type")).To(Equal("application/yaml"))
		Expect(res.Body).To(Equal(openapi.YAML))
		var parsed map[string]any
		Expect(yaml.Unmarshal(res.Body, &parsed)).To(Succeed())
	})

	It("answers the probes", func() {
		Expect(h.GET("/healthz", "").JSON()["status"]).To(Equal("ok"))
		Expect(h.GET("/readyz", "").JSON()["status"]).To(Equal("ready"))
	})
})
