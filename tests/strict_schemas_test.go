package tests

import (
	"encoding/json"
	"net/http"

	"github.com/getkin/kin-openapi/openapi3"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// closeObjects makes every object schema of doc refuse members it does not declare, so that
// validating an answer catches an undocumented member instead of letting it through (the
// document leaves additionalProperties open so that clients tolerate additions; the server
// must still document each one). An allOf composition of objects becomes one closed object
// with the union of its parts' members (closing each part would refuse the others' members);
// schemas that say additionalProperties themselves keep it.
func closeObjects(doc *openapi3.T) {
	var visit func(*openapi3.SchemaRef)
	seen := map[*openapi3.Schema]bool{}
	var schemas []*openapi3.Schema
	visit = func(ref *openapi3.SchemaRef) {
		if ref == nil || ref.Value == nil || seen[ref.Value] {
			return
		}
		s := ref.Value
		seen[s] = true
		schemas = append(schemas, s)
		for _, list := range []openapi3.SchemaRefs{s.AllOf, s.OneOf, s.AnyOf} {
			for _, p := range list {
				visit(p)
			}
		}
		for _, p := range s.Properties {
			visit(p)
		}
		visit(s.Items)
		visit(s.AdditionalProperties.Schema)
		visit(s.Not)
	}
	for _, ref := range doc.Components.Schemas {
		visit(ref)
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, res := range op.Responses.Map() {
				if res.Value == nil {
					continue
				}
				for _, media := range res.Value.Content {
					visit(media.Schema)
				}
			}
		}
	}
	for _, s := range schemas {
		open := s.AdditionalProperties.Has != nil || s.AdditionalProperties.Schema != nil
		if open {
			continue
		}
		if len(s.AllOf) > 0 {
			merged := openapi3.Schemas{}
			for name, p := range s.Properties {
				merged[name] = p
			}
			required := s.Required
			for _, part := range s.AllOf {
				for name, p := range part.Value.Properties {
					merged[name] = p
				}
				required = append(required, part.Value.Required...)
			}
			s.Properties, s.Required, s.AllOf = merged, required, nil
			s.Type = &openapi3.Types{openapi3.TypeObject}
		} else if len(s.Properties) == 0 {
			continue // not an object with members (a primitive, a union, an empty object)
		}
		closed := false
		s.AdditionalProperties.Has = &closed
	}
}

var _ = ForEachEngine("Validating answers against the document", func(h *Harness) {
	// resend checks an answer the server gave, changed by edit, as if the server had sent it.
	resend := func(path string, res *Response, edit func(body map[string]any)) error {
		var body map[string]any
		Expect(json.Unmarshal(res.Body, &body)).To(Succeed())
		edit(body)
		data, err := json.Marshal(body)
		Expect(err).NotTo(HaveOccurred())
		req, err := http.NewRequest(http.MethodGet, h.URL+path, nil)
		Expect(err).NotTo(HaveOccurred())
		return validateResponse(req, &Response{Status: res.Status, Header: res.Header, Body: data})
	}

	It("refuses members the document does not declare, at any depth and in compositions", func() {
		city := h.NewCity(CityOpts{})
		trip := h.NewTrip(TripOpts{Driver: h.NewDriver(DriverOpts{City: city.ID}), Rider: h.NewRider(), Status: "completed"})
		path := "/v1/trips/" + trip.ID
		res := h.GET(path, h.Admin)
		Expect(resend(path, res, func(map[string]any) {})).To(Succeed())
		Expect(resend(path, res, func(b map[string]any) { b["surprise"] = 1 })).NotTo(Succeed())
		Expect(resend(path, res, func(b map[string]any) { b["fare"].(map[string]any)["tip"] = 1 })).NotTo(Succeed())

		created := h.Do(Request{Method: http.MethodPost, Path: "/v1/webhook-endpoints", Key: h.Admin,
			Body: map[string]any{"url": "https://partner.example.com/hooks", "events": []string{"trip.completed"}}})
		Expect(created.Status).To(Equal(http.StatusCreated))
		post := func(edit func(map[string]any)) error {
			var body map[string]any
			Expect(json.Unmarshal(created.Body, &body)).To(Succeed())
			edit(body)
			data, err := json.Marshal(body)
			Expect(err).NotTo(HaveOccurred())
			req, err := http.NewRequest(http.MethodPost, h.URL+"/v1/webhook-endpoints", nil)
			Expect(err).NotTo(HaveOccurred())
			return validateResponse(req, &Response{Status: created.Status, Header: created.Header, Body: data})
		}
		Expect(post(func(map[string]any) {})).To(Succeed(), "both parts of the allOf are declared")
		Expect(post(func(b map[string]any) { b["surprise"] = true })).NotTo(Succeed())
		Expect(post(func(b map[string]any) { delete(b, "secret") })).NotTo(Succeed())
	})
})
