package tests

import (
	"encoding/json"

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

	It("publishes as JSON the same document as the YAML: same data, same member order", func() {
		res := h.GET("/v1/openapi.json", "")
		Expect(res.Status).To(Equal(200))
		var fromJSON, fromYAML any
		Expect(json.Unmarshal(res.Body, &fromJSON)).To(Succeed())
		Expect(yaml.Unmarshal(openapi.YAML, &fromYAML)).To(Succeed())
		// Round-trip the YAML's data through JSON so that numbers compare as JSON numbers.
		data, err := json.Marshal(fromYAML)
		Expect(err).NotTo(HaveOccurred())
		var want any
		Expect(json.Unmarshal(data, &want)).To(Succeed())
		Expect(fromJSON).To(Equal(want))

		// Readers and tools that keep order (Swagger UI, generators) see the YAML's order.
		var node yaml.Node
		Expect(yaml.Unmarshal(openapi.YAML, &node)).To(Succeed())
		var yamlPaths []string
		for _, top := range [][]*yaml.Node{node.Content[0].Content} {
			for i := 0; i+1 < len(top); i += 2 {
				if top[i].Value == "paths" {
					for j := 0; j < len(top[i+1].Content); j += 2 {
						yamlPaths = append(yamlPaths, top[i+1].Content[j].Value)
					}
				}
			}
		}
		var top map[string]json.RawMessage
		Expect(json.Unmarshal(res.Body, &top)).To(Succeed())
		Expect(objectKeys(top["paths"])).To(Equal(yamlPaths))
		Expect(string(res.Body)).To(ContainSubstring(`"operationId":"getTrip"`))
	})

	It("answers the probes", func() {
		Expect(h.GET("/healthz", "").JSON()["status"]).To(Equal("ok"))
		Expect(h.GET("/readyz", "").JSON()["status"]).To(Equal("ready"))
	})
})
