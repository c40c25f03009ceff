package graphql

import (
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("The GraphQL answer's envelope", func() {
	It("writes an answer without errors as json.Marshal encodes the envelope", func() {
		env := graphQLEnvelope{
			Data:       json.RawMessage(`{"trip":{"status":"COMPLETED","driver":{"name":"Ana <\"Ana\"> & co","rating":4.9},"fare":null}}`),
			Extensions: graphQLExtensions{Cost: graphQLCost{Requested: 10, Limit: graphQLMaxCost}},
		}
		answer, err := env.answer(200)
		Expect(err).NotTo(HaveOccurred())
		marshalled, err := json.Marshal(env)
		Expect(err).NotTo(HaveOccurred())
		Expect(answer.Body).To(MatchJSON(marshalled))
		Expect(string(answer.Body)).To(HavePrefix(`{"data":{"trip":`)) // as graphql-go wrote it, field order kept
	})
})
