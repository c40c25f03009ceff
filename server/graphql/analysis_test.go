package graphql

import (
	"fmt"
	"math"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("GraphQL document analysis", func() {
	DescribeTable("measures the fields a document selects once fragments are expanded",
		func(doc string, cost int) {
			a, err := analyzeDocument(doc, "")
			Expect(err).To(BeNil())
			Expect(a.cost).To(Equal(cost))
		},
		Entry("one field", `{ __typename }`, 1),
		Entry("the seed's query", `{ trip(id: "x") { status etaMinutes driver { name rating photo } fare { total currency } } }`, 10),
		Entry("aliases count apart", `{ a: trip(id: "x") { id } b: trip(id: "y") { id } }`, 4),
		Entry("a fragment counts where it is spread", `{ a: trip(id: "x") { ...T } b: trip(id: "y") { ...T } } fragment T on Trip { id status }`, 6),
		Entry("inline fragments count their fields", `{ trip(id: "x") { ... on Trip { id } } }`, 2),
		Entry("unused fragments do not count", `{ __typename } fragment U on Trip { id status city }`, 1),
		Entry("an unknown fragment counts nothing (validation names it)", `{ ...Missing }`, 0),
		Entry("introspection counts like data", `{ __schema { types { name } } }`, 3),
		Entry("a field repeated exactly runs once and counts once", `{ driver(id: "x") { name name name } }`, 2),
		Entry("a repeated subtree counts once", `{ trip(id: "x") { id driver { name } } trip(id: "x") { id driver { name } } }`, 4),
		Entry("a repeated inline fragment or spread counts once", `{ trip(id: "x") { ... on Trip { id } ... on Trip { id } ...T ...T } } fragment T on Trip { status }`, 3),
		Entry("other arguments, aliases or directives are other fields", `{ a: trip(id: "x") { id } trip(id: "x") { id } b: trip(id: "y") { id } trip(id: "x") @skip(if: true) { id } }`, 8),
	)

	It("blanks the repeats out of the document it runs, keeping every other token where it was", func() {
		doc := "{\n  driver(id: \"x\") {\n    name, name # twice\n    rating\n    name @include(if: true)\n  name\n  }\n  driver(id: \"x\") { name }\n}"
		a, err := analyzeDocument(doc, "")
		Expect(err).To(BeNil())
		Expect(a.query).To(Equal("{\n  driver(id: \"x\") {\n    name,             \n    rating\n    name @include(if: true)\n      \n  }\n  driver(id: \"x\") { name }\n}"))
		Expect(a.cost).To(Equal(6))
		same, err := analyzeDocument(`{ driver(id: "x") { name } }`, "")
		Expect(err).To(BeNil())
		Expect(same.query).To(Equal(`{ driver(id: "x") { name } }`), "a document without repeats runs as sent")
	})

	DescribeTable("refuses documents over a limit, before running them",
		func(doc, code, message string) {
			_, err := analyzeDocument(doc, "")
			Expect(err).NotTo(BeNil())
			Expect(err.code).To(Equal(code))
			Expect(err.message).To(ContainSubstring(message))
		},
		Entry("depth 11", `{ a { b { c { d { e { f { g { h { i { j { k } } } } } } } } } } }`, gqlCodeTooDeep, "11 deep; the limit is 10"),
		Entry("depth 11 through fragments", `{ a { ...B } } fragment B on X { b { c { d { e { f { g { h { i { j { k } } } } } } } } } }`, gqlCodeTooDeep, "11 deep"),
		Entry("introspection deeper than 20", `{ __schema {`+strings.Repeat(" a {", 20)+" b "+strings.Repeat("}", 20)+` } }`, gqlCodeTooDeep, "22 deep; the limit is 20"),
		Entry("introspection lists nested 3 deep (the meta-schema is cyclic)",
			`{ __schema { types { fields { type { ofType { fields { type { ofType { fields { name } } } } } } } } } }`,
			gqlCodeTooDeep, "possibleTypes 3 deep; the limit is 2"),
		Entry("introspection lists nested 3 deep through fragments",
			`{ __type(name: "Trip") { ...L } } fragment L on __Type { interfaces { possibleTypes { inputFields { name } } } }`,
			gqlCodeTooDeep, "3 deep; the limit is 2"),
		Entry("1,100 fields", spreads(11), gqlCodeTooComplex, "1100 fields; the limit is 1000"),
		Entry("10,001 characters", "{ __typename }#"+strings.Repeat("x", 10_001-15), gqlCodeTooLong, "10001 characters"),
		Entry("a syntax error", `{ trip(id: "x" { id } }`, gqlCodeParseFailed, "Syntax error"),
		Entry("a fragment cycle", `{ ...A } fragment A on Query { ...B } fragment B on Query { ...A }`, gqlCodeValidationFailed, "within itself"),
		Entry("a mutation", `mutation { cancel }`, gqlCodeBadRequest, "mutation operations are not supported"),
		Entry("no operation", `fragment F on Query { __typename }`, gqlCodeOperationResolutionFailure, "no operation"),
		Entry("two anonymous operations", `{ a } { b }`, gqlCodeOperationResolutionFailure, "operationName"),
		Entry("fields of one name with other arguments", `{ a: trip(id: "x") { id } a: trip(id: "y") { id } }`, gqlCodeValidationFailed, `Fields "a" conflict because they have differing arguments`),
		Entry("fields of one name that are other fields", `{ driver(id: "x") { a: name a: rating } }`, gqlCodeValidationFailed, `"name" and "rating" are different fields`),
		Entry("a conflict brought by a fragment", `{ driver(id: "x") { a: name ...D } } fragment D on Driver { a: photo }`, gqlCodeValidationFailed, `Fields "a" conflict`),
		Entry("a conflict between the selections of fields that merge", `{ trip(id: "x") { driver { n: name } } trip(id: "x") { driver { n: rating } } }`, gqlCodeValidationFailed, `Fields "n" conflict`),
	)

	It("reports one conflict of a document full of them, at both fields", func() {
		var doc strings.Builder
		doc.WriteString("{")
		for i := range 300 {
			fmt.Fprintf(&doc, " a: driver(id: \"%d\") { name }", i)
		}
		doc.WriteString(" }")
		_, err := analyzeDocument(doc.String(), "")
		Expect(err).NotTo(BeNil())
		Expect(err.code).To(Equal(gqlCodeValidationFailed))
		Expect(err.locations).To(HaveLen(2))
		_, err = analyzeDocument(`{ trip(id: "x") { id } trip(id: "x") { status } a: driver(id: "y") { name } ...D } fragment D on Query { a: driver(id: "y") { rating } }`, "")
		Expect(err).To(BeNil(), "same field, same arguments: the selections merge")
	})

	It("accepts exactly the limits", func() {
		deep := `{ a { b { c { d { e { f { g { h { i { j } } } } } } } } } }`
		_, err := analyzeDocument(deep, "")
		Expect(err).To(BeNil())
		a, err := analyzeDocument(spreads(10), "")
		Expect(err).To(BeNil())
		Expect(a.cost).To(Equal(1000))
		doc := "{ __typename }#"
		_, err = analyzeDocument(doc+strings.Repeat("é", 10_000-len(doc)), "")
		Expect(err).To(BeNil(), "the length limit counts characters, not bytes")
	})

	It("lets data fields named like introspection lists nest", func() {
		_, err := analyzeDocument(`{ a { fields { fields { fields { name } } } } }`, "")
		Expect(err).To(BeNil())
		_, err = analyzeDocument(`{ __schema { types { fields { type { ofType { fields { name } } } } } } }`, "")
		Expect(err).To(BeNil(), "two nested lists are allowed")
	})

	It("measures a fragment once however often it is spread, and saturates the count", func() {
		var doc strings.Builder
		doc.WriteString("{ ...F0 }\n")
		for i := 0; i < 62; i++ {
			fmt.Fprintf(&doc, "fragment F%d on Query { ...A%d ...B%d }\n", i, i, i)
			fmt.Fprintf(&doc, "fragment A%d on Query { ...F%d }\nfragment B%d on Query { ...F%d }\n", i, i+1, i, i+1)
		}
		doc.WriteString("fragment F62 on Query { __typename }")
		a, err := analyzeDocument(doc.String(), "")
		Expect(err).NotTo(BeNil())
		Expect(err.code).To(Equal(gqlCodeTooComplex))
		Expect(a.cost).To(Equal(math.MaxInt32))
	})

	It("picks the operation named by operationName", func() {
		a, err := analyzeDocument(`query A { __typename } query B { a: __typename b: __typename }`, "B")
		Expect(err).To(BeNil())
		Expect(a.operation.Name).To(Equal("B"))
		Expect(a.cost).To(Equal(2))
		_, err = analyzeDocument(`query A { __typename }`, "C")
		Expect(err.code).To(Equal(gqlCodeOperationResolutionFailure))
	})

	It("foresees the ids of root fields, from literals, variables and defaults", func() {
		a, err := analyzeDocument(`query($t: ID!, $u: ID = "trp_ddddddddddddddddddddddddda", $n: ID) {
			a: trip(id: "trp_aaaaaaaaaaaaaaaaaaaaaaaaaa") { id }
			b: trip(id: $t) { id }
			c: trip(id: $u) { id }
			d: trip(id: $n) { id }
			e: trip(id: "not-an-id") { id }
			...More
			driver(id: "drv_aaaaaaaaaaaaaaaaaaaaaaaaaa") { name }
		}
		fragment More on Query { f: trip(id: "trp_aaaaaaaaaaaaaaaaaaaaaaaaaa") { id } g: trip(id: "trp_ccccccccccccccccccccccccca") { id } }`, "")
		Expect(err).To(BeNil())
		vars := map[string]any{"t": "trp_bbbbbbbbbbbbbbbbbbbbbbbbba", "n": 12.0}
		Expect(a.rootIDs("trip", "trp", vars)).To(Equal([]string{
			"trp_aaaaaaaaaaaaaaaaaaaaaaaaaa", "trp_bbbbbbbbbbbbbbbbbbbbbbbbba", "trp_ddddddddddddddddddddddddda", "trp_ccccccccccccccccccccccccca",
		}))
		Expect(a.rootIDs("driver", "drv", vars)).To(Equal([]string{"drv_aaaaaaaaaaaaaaaaaaaaaaaaaa"}))
	})
})

var _ = Describe("the document cache", func() {
	It("analyses a document once, keeps only documents that passed, and stays bounded", func() {
		var c documentCache
		doc := `query Trip($id: ID!) { trip(id: $id) { status } }`
		first, err := c.analyze("acct_test", doc, "Trip")
		Expect(err).To(BeNil())
		again, err := c.analyze("acct_test", doc, "Trip")
		Expect(err).To(BeNil())
		Expect(again.doc).To(BeIdenticalTo(first.doc), "the second request reuses the first analysis")
		other, err := c.analyze("acct_test", doc, "")
		Expect(err).To(BeNil())
		Expect(other.doc).NotTo(BeIdenticalTo(first.doc), "the operation name is part of the key")

		_, err = c.analyze("acct_test", spreads(200), "")
		Expect(err).NotTo(BeNil())
		Expect(c.accounts["acct_test"].entries).To(HaveLen(2), "a refused document is not kept")

		for i := range documentCacheSize + 10 {
			_, err := c.analyze("acct_test", fmt.Sprintf("{ trip(id: \"trp_%d\") { id } }", i), "")
			Expect(err).To(BeNil())
		}
		Expect(c.accounts["acct_test"].entries).To(HaveLen(documentCacheSize))
		Expect(c.accounts["acct_test"].bytes).To(BeNumerically("<=", documentCacheBytes))
	})

	It("keeps at most documentCacheBytes of an account's document text, whatever the documents' number", func() {
		var c documentCache
		long := strings.Repeat("id ", graphQLMaxCost-1) // the longest a document of one trip's ids can be
		for i := range 2 * documentCacheBytes / len(long) {
			_, err := c.analyze("acct_test", fmt.Sprintf("{ trip(id: \"trp_%d\") { %s } }", i, long), "")
			Expect(err).To(BeNil())
			Expect(c.accounts["acct_test"].bytes).To(BeNumerically("<=", documentCacheBytes))
		}
		own := c.accounts["acct_test"]
		Expect(len(own.entries)).To(BeNumerically("<", documentCacheSize))
		Expect(len(own.entries)).To(BeNumerically(">=", documentCacheBytes/(len(long)+40)-1), "the budget is used, not wasted")
		sum := 0
		for k := range own.entries {
			sum += k.size()
		}
		Expect(own.bytes).To(Equal(sum), "the budget counts exactly the cached documents")
	})

	It("lets no account's documents push out another's, up to documentCacheAccounts accounts", func() {
		var c documentCache
		mine := `{ trip(id: "trp_aaaaaaaaaaaaaaaaaaaaaaaaaa") { status } }`
		first, err := c.analyze("acct_one", mine, "")
		Expect(err).To(BeNil())
		// Emoji count one character each against the length limit and four bytes each here.
		padding := "# " + strings.Repeat("\U0001F600", graphQLMaxLength-100) + "\n"
		for i := range 3 * documentCacheBytes / len(padding) {
			_, err := c.analyze("acct_two", fmt.Sprintf("%s{ trip(id: \"trp_%d\") { id } }", padding, i), "")
			Expect(err).To(BeNil())
		}
		for i := range documentCacheAccounts - 2 {
			_, err := c.analyze(fmt.Sprintf("acct_%d", i), mine, "")
			Expect(err).To(BeNil())
		}
		again, err := c.analyze("acct_one", mine, "")
		Expect(err).To(BeNil())
		Expect(again.doc).To(BeIdenticalTo(first.doc), "still cached")
		Expect(c.accounts["acct_two"].bytes).To(BeNumerically("<=", documentCacheBytes))

		_, err = c.analyze("acct_one_more", mine, "")
		Expect(err).To(BeNil())
		Expect(c.accounts).To(HaveLen(documentCacheAccounts), "past the accounts' bound, one account's part is forgotten")
	})

	It("keeps each account's documents apart: another account's request for the same text is analysed anew", func() {
		var c documentCache
		doc := `{ trip(id: "trp_aaaaaaaaaaaaaaaaaaaaaaaaaa") { status } }`
		mine, err := c.analyze("acct_one", doc, "")
		Expect(err).To(BeNil())
		theirs, err := c.analyze("acct_two", doc, "")
		Expect(err).To(BeNil())
		Expect(theirs.doc).NotTo(BeIdenticalTo(mine.doc))
	})
})

// spreads is a document of n trips, each spreading a fragment of 99 fields: 100 n fields.
func spreads(n int) string {
	var doc strings.Builder
	doc.WriteString("{ ")
	for i := range n {
		fmt.Fprintf(&doc, "t%d: trip(id: \"x\") { ...F } ", i)
	}
	doc.WriteString("} fragment F on Trip { ")
	for i := range 99 {
		fmt.Fprintf(&doc, "f%d: id ", i)
	}
	return doc.String() + "}"
}
