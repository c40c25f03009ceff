package graphql

import (
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("The GraphQL answer's envelope", func() {
	DescribeTable("writes an answer without errors byte for byte as json.Marshal encodes the envelope",
		func(data string) {
			env := graphQLEnvelope{
				Data:       json.RawMessage(data),
				Extensions: graphQLExtensions{Cost: graphQLCost{Requested: 10, Limit: graphQLMaxCost}},
			}
			answer, err := env.answer(200)
			Expect(err).NotTo(HaveOccurred())
			marshalled, err := json.Marshal(env)
			Expect(err).NotTo(HaveOccurred())
			Expect(string(answer.Body)).To(Equal(string(marshalled)))
		},
		// As graphql-go writes data: compact, with <, > and & escaped as json.Marshal escapes them.
		Entry("a trip", `{"trip":{"status":"COMPLETED","driver":{"name":"Ana \u003c\"Ana\"\u003e \u0026 co","rating":4.9},"fare":null}}`),
		Entry("a null root field", `{"trip":null}`),
		Entry("null", `null`),
	)
})
