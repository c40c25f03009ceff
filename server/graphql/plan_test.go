package graphql

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"

	graphql "github.com/graph-gophers/graphql-go"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vektah/gqlparser/v2/ast"
)

// Which documents run by a plan; server/graphql_plan_test.go checks that their answers are
// graphql-go's.
var _ = Describe("A document's plan", func() {
	var h *Handler
	BeforeEach(func() {
		var err error
		h, err = New(Config{})
		Expect(err).NotTo(HaveOccurred())
	})

	DescribeTable("is made for a plain, valid query",
		func(query, operationName string) {
			Expect(h.Planned("acct_test", query, operationName)).To(BeTrue())
		},
		Entry("with an ID! variable", `query Trip($id: ID!) { trip(id: $id) { status etaMinutes driver { name rating photo } fare { total currency } } }`, ""),
		Entry("with aliases, __typename and string literals", `{ __typename a: trip(id: "trp_1") { __typename s: status } b: driver(id: "drv_1") { name } }`, ""),
		Entry("named among several operations", `query A { trip(id: "trp_1") { id } } query B { driver(id: "drv_1") { id } }`, "B"),
	)

	DescribeTable("is not made, and graphql-go runs the document, when it is not plain",
		func(query, operationName string) {
			Expect(h.Planned("acct_test", query, operationName)).To(BeFalse())
		},
		Entry("a fragment spread", `query { trip(id: "trp_1") { ...F } } fragment F on Trip { id }`, ""),
		Entry("an inline fragment", `query { trip(id: "trp_1") { ... on Trip { id } } }`, ""),
		Entry("a directive", `query($b: Boolean!) { trip(id: "trp_1") { id @include(if: $b) } }`, ""),
		Entry("a nullable variable", `query($id: ID) { trip(id: $id) { id } }`, ""),
		Entry("a variable with a default", `query($id: ID! = "trp_1") { trip(id: $id) { id } }`, ""),
		Entry("a variable of another type", `query($id: String!) { trip(id: $id) { id } }`, ""),
		Entry("an integer literal id", `{ trip(id: 12) { id } }`, ""),
		Entry("a response key twice", `{ trip(id: "trp_1") { id } trip(id: "trp_1") { status } }`, ""),
		Entry("introspection", `{ __schema { queryType { name } } }`, ""),
		Entry("an unknown field", `{ trip(id: "trp_1") { colour } }`, ""),
		Entry("a field without its selection", `{ trip(id: "trp_1") }`, ""),
		Entry("a subscription", `subscription($id: ID!) { tripUpdated(tripId: $id) { status } }`, ""),
		Entry("a document graphql-go finds invalid elsewhere", `query A { trip(id: "trp_1") { id } } query A { driver(id: "drv_1") { id } }`, "A"),
	)
})

var _ = Describe("A plan's scalars", func() {
	It("are written byte for byte as json.Marshal writes them", func() {
		for _, f := range []float64{0, -0.0, 1, -1, 4.85, 37.774929, -122.419416, 1e-6, 9.99e-7, 1.5e-9, 123456789.125,
			1e20, 1e21, -1e21, 1.7976931348623157e308, 5e-324, 0.1 + 0.2} {
			var out bytes.Buffer
			writeFloat(&out, f)
			want, err := json.Marshal(f)
			Expect(err).NotTo(HaveOccurred())
			Expect(out.String()).To(Equal(string(want)), "%v", f)
		}
		for _, s := range []string{"", "plain text 123", `a "quoted" \ path`, "<b>&amp;</b>", "tab\there\nnew", "Zoë", "\u2028\u2029",
			"\x7f", "bad \xff utf-8", "https://example.com/p.jpg?w=1&h=2"} {
			var out bytes.Buffer
			writeString(&out, s)
			want, err := json.Marshal(s)
			Expect(err).NotTo(HaveOccurred())
			Expect(out.String()).To(Equal(string(want)), "%q", s)
			out.Reset()
			want, err = json.Marshal(graphql.ID(s))
			if err != nil { // graphql.ID quotes as Go does, which is not always JSON: graphql-go reports the field
				Expect(func() { writeID(&out, graphql.ID(s)) }).To(PanicWith(planStop{}), "ID %q", s)
				continue
			}
			writeID(&out, graphql.ID(s))
			Expect(out.String()).To(Equal(string(want)), "ID %q", s)
		}
	})
})

// A plan over resolvers it has no typed calls for: every field through reflect, against
// graphql-go running the same document on the same resolvers.
var _ = Describe("A plan over resolvers called through reflect", func() {
	It("answers as graphql-go does", func(ctx SpecContext) {
		const sdl = `
			schema { query: Query }
			enum Kind { SMALL LARGE }
			type Query { thing(id: ID!): Thing }
			type Thing { id: ID! name: String! note: String score: Float count: Int! kind: Kind! child: Thing broken: Thing }`
		sch, err := graphql.ParseSchema(sdl, &reflectRoot{})
		Expect(err).NotTo(HaveOccurred())
		doc := `query Q($id: ID!) { __typename a: thing(id: $id) { id name note score count kind child { name kind child { id } } broken { id } }
			b: thing(id: "missing") { id } c: thing(id: "refused") { id } }`
		p := compilePlan(sch.AST(), reflect.TypeFor[*reflectRoot](), mustOperation(doc))
		Expect(p).NotTo(BeNil())
		Expect(p.fields[1].call).To(BeNil(), "no typed call: the reflect path runs")
		variables := map[string]any{"id": "t1"}
		data, errs, ok := p.run(ctx, &reflectRoot{}, variables)
		Expect(ok).To(BeTrue())
		want := sch.Exec(ctx, doc, "", variables)
		Expect(string(data)).To(Equal(string(want.Data)))
		Expect(errs).To(HaveLen(1))
		Expect(want.Errors).To(HaveLen(1))
		Expect(errs[0].Message).To(Equal(want.Errors[0].Message))
		Expect(errs[0].Path).To(Equal(want.Errors[0].Path))
		Expect(errs[0].Extensions).To(Equal(want.Errors[0].Extensions))
	})
})

func mustOperation(doc string) *ast.OperationDefinition {
	a, reqErr := analyzeDocument(doc, "")
	Expect(reqErr).To(BeNil())
	return a.operation
}

type reflectRoot struct{}

func (*reflectRoot) Thing(_ context.Context, args struct{ ID idInput }) (*reflectThing, error) {
	switch args.ID {
	case "missing":
		return nil, nil
	case "refused":
		return nil, &graphQLFieldError{code: gqlCodeForbidden, message: "Not yours."}
	}
	return &reflectThing{id: string(args.ID), depth: 0}, nil
}

type reflectThing struct {
	id    string
	depth int
}

func (t *reflectThing) ID() graphql.ID        { return graphql.ID(t.id) }
func (t *reflectThing) Name() string          { return `Thing <"` + t.id + `"> & co` }
func (t *reflectThing) Note() *string         { return nil }
func (t *reflectThing) Score() *float64       { s := 0.1 + 0.2; return &s }
func (t *reflectThing) Count() int32          { return int32(t.depth) }
func (t *reflectThing) Kind() string          { return []string{"SMALL", "LARGE"}[t.depth%2] }
func (t *reflectThing) Broken() *reflectThing { return nil }
func (t *reflectThing) Child(ctx context.Context) *reflectThing {
	if t.depth == 2 {
		return nil
	}
	return &reflectThing{id: t.id + ".child", depth: t.depth + 1}
}
