package tests

import (
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = ForEachEngine("GraphQL over HTTP media types", func(h *Harness) {
	post := func(accept, query string) *Response {
		header := map[string]string{}
		if accept != "" {
			header["Accept"] = accept
		}
		return h.Do(Request{Method: http.MethodPost, Path: "/v1/graphql", Key: h.Admin, Header: header,
			Body: map[string]any{"query": query}})
	}

	DescribeTable("answers the media type the client prefers, with the same statuses",
		func(accept, want string) {
			ok := post(accept, "{ __typename }")
			Expect(ok.Status).To(Equal(http.StatusOK), "%s", ok.Body)
			Expect(ok.Header.Get("Content-Type")).To(Equal(want))
			Expect(ok.JSON()).To(HaveKeyWithValue("data", HaveKeyWithValue("__typename", "Query")))

			bad := post(accept, "{ nope }")
			Expect(bad.Status).To(Equal(http.StatusBadRequest), "%s", bad.Body)
			Expect(bad.Header.Get("Content-Type")).To(Equal(want))
			Expect(bad.JSON()).To(HaveKey("errors"))
			Expect(bad.JSON()).NotTo(HaveKey("data"))
		},
		Entry("graphql-response+json alone", "application/graphql-response+json", "application/graphql-response+json"),
		Entry("graphql-response+json first", "application/graphql-response+json, application/json;q=0.9", "application/graphql-response+json"),
		Entry("json preferred", "application/json, application/graphql-response+json;q=0.5", "application/json"),
		Entry("json alone", "application/json", "application/json"),
		Entry("anything", "*/*", "application/json"),
		Entry("no Accept", "", "application/json"),
	)

	It("answers the October 2021 introspection fields: the schema's description, repeatable directives", func() {
		res := post("", "{ __schema { description directives { name isRepeatable } } }")
		Expect(res.Status).To(Equal(http.StatusOK), "%s", res.Body)
		var answer struct {
			Data struct {
				Schema struct {
					Description *string
					Directives  []struct {
						Name         string
						IsRepeatable *bool
					}
				} `json:"__schema"`
			}
		}
		res.Decode(&answer)
		Expect(answer.Data.Schema.Description).NotTo(BeNil())
		Expect(*answer.Data.Schema.Description).To(HavePrefix("The query interface of Ride API"))
		Expect(answer.Data.Schema.Directives).NotTo(BeEmpty())
		for _, d := range answer.Data.Schema.Directives {
			Expect(d.IsRepeatable).To(HaveValue(BeFalse()), d.Name)
		}
		// Under aliases and fragments too.
		res = post("", "{ s: __schema { ...S } } fragment S on __Schema { about: description directives { ... on __Directive { again: isRepeatable } } }")
		Expect(res.Status).To(Equal(http.StatusOK), "%s", res.Body)
		Expect(string(res.Body)).To(ContainSubstring(`"about":"The query interface`))
		Expect(string(res.Body)).To(ContainSubstring(`"again":false`))
		// A field of the document that answers "__Schema" under the same key keeps its answer.
		res = post("", `{ __schema { description } t: __type(name: "__Schema") { description: name } }`)
		Expect(res.Status).To(Equal(http.StatusOK), "%s", res.Body)
		Expect(res.JSON()).To(HaveKeyWithValue("data", SatisfyAll(
			HaveKeyWithValue("__schema", HaveKeyWithValue("description", HavePrefix("The query interface of Ride API"))),
			HaveKeyWithValue("t", HaveKeyWithValue("description", "__Schema")))))
	})

	It("refuses batches and application/graphql bodies with documented problems", func() {
		batch := h.Do(Request{Method: http.MethodPost, Path: "/v1/graphql", Key: h.Admin,
			Body: []byte(`[{"query":"{ __typename }"}]`)})
		ExpectProblem(batch, http.StatusBadRequest, "invalid_request")
		raw := h.Do(Request{Method: http.MethodPost, Path: "/v1/graphql", Key: h.Admin, Body: "{ __typename }",
			Header: map[string]string{"Content-Type": "application/graphql"}})
		ExpectProblem(raw, http.StatusUnsupportedMediaType, "unsupported_media_type")
	})
})
