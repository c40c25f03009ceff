package server

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/rideapi/ride/server/problem"
)

var _ = Describe("the problem types page", func() {
	It("lists every code of the error table, each explained with its status", func() {
		rows := problem.Catalogue()
		Expect(rows).NotTo(BeEmpty())
		for _, row := range rows {
			Expect(row.Meaning).NotTo(BeEmpty(), "explain %q in problems.go", row.Code)
			Expect(row.Title).NotTo(BeEmpty(), row.Code)
			Expect(row.Status).To(BeNumerically(">=", 400), row.Code)
		}
	})
})
