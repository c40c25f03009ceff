package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/schema"
	"github.com/rideapi/ride/server"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/store/storetest"
)

// seedQuery is the query of the seed's query-document section.
const seedQuery = `query Trip($id: ID!) { trip(id: $id) { status etaMinutes driver { name rating photo } fare { total currency } } }`

// introspectionQuery is what GraphiQL and graphql-js's getIntrospectionQuery send: 12 levels
// deep, so it needs the introspection depth allowance.
const introspectionQuery = `query IntrospectionQuery {
  __schema {
    queryType { name } mutationType { name } subscriptionType { name }
    types { ...FullType }
    directives { name description locations args { ...InputValue } }
  }
}
fragment FullType on __Type {
  kind name description
  fields(includeDeprecated: true) { name description args { ...InputValue } type { ...TypeRef } isDeprecated deprecationReason }
  inputFields { ...InputValue }
  interfaces { ...TypeRef }
  enumValues(includeDeprecated: true) { name description isDeprecated deprecationReason }
  possibleTypes { ...TypeRef }
}
fragment InputValue on __InputValue { name description type { ...TypeRef } defaultValue }
fragment TypeRef on __Type {
  kind name
  ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name } } } } } } }
}`

var _ = ForEachEngine("The GraphQL query interface", func(h *Harness) {
	var (
		driver store.Driver
		rider  store.Rider
		trip   store.Trip
	)
	BeforeEach(func() {
		driver = h.NewDriver(DriverOpts{})
		rider = h.NewRider()
		trip = h.NewTrip(TripOpts{Driver: driver, Rider: rider, Status: "arriving"})
		Expect(storetest.SetTripETA(context.Background(), h.Store, trip.ID, 7)).To(Succeed())
	})

	Describe("the seed's query", func() {
		It("returns exactly the fields asked for, in order, with the values of GET /v1/trips/{id}", func() {
			riderKey := h.Key(auth.RoleRider, rider.ID)
			for _, key := range []string{riderKey, h.Key(auth.RoleDriver, driver.ID), h.Admin} {
				res := h.GQL(key, map[string]any{"query": seedQuery, "variables": map[string]any{"id": trip.ID}, "operationName": "Trip"})
				Expect(res.Status).To(Equal(200))
				answer := gqlDecode(res)
				Expect(answer.Errors).To(BeEmpty())
				Expect(answer.Extensions.Cost.Requested).To(Equal(10), "trip, 2 scalars, driver and 3, fare and 2")

				data := json.RawMessage(res.Body)
				Expect(objectKeys(data)).To(Equal([]string{"data", "extensions"}))
				Expect(objectKeys(member(data, "data"))).To(Equal([]string{"trip"}))
				Expect(objectKeys(member(data, "data", "trip"))).To(Equal([]string{"status", "etaMinutes", "driver", "fare"}))
				Expect(objectKeys(member(data, "data", "trip", "driver"))).To(Equal([]string{"name", "rating", "photo"}))
				Expect(objectKeys(member(data, "data", "trip", "fare"))).To(Equal([]string{"total", "currency"}))

				var rest gen.Trip
				h.GET("/v1/trips/"+trip.ID, key).Decode(&rest)
				got := answer.Data["trip"].(map[string]any)
				Expect(got["status"]).To(Equal(strings.ToUpper(string(rest.Status))))
				Expect(got["etaMinutes"]).To(BeEquivalentTo(*rest.EtaMinutes))
				Expect(got["driver"]).To(Equal(map[string]any{
					"name": rest.DriverSummary.Name, "rating": *rest.DriverSummary.Rating, "photo": *rest.DriverSummary.Photo,
				}))
				Expect(got["fare"]).To(Equal(map[string]any{"total": float64(rest.Fare.Total), "currency": rest.Fare.Currency}))
			}
		})

		It("serves the other public members as REST does, timestamps included", func() {
			answer := h.Query(h.Admin, `query($id: ID!) { trip(id: $id) {
				id rideType city riderId createdAt updatedAt pickupTime completedAt cancelledAt
				pickup { lat lng address } dropoff { lat lng address } driver { id } } }`, map[string]any{"id": trip.ID})
			Expect(answer.Errors).To(BeEmpty())
			rest := h.GET("/v1/trips/"+trip.ID, h.Admin).JSON()
			got := answer.Data["trip"].(map[string]any)
			Expect(got["id"]).To(Equal(rest["id"]))
			Expect(got["rideType"]).To(Equal(strings.ToUpper(rest["ride_type"].(string))))
			Expect(got["city"]).To(Equal(rest["city"]))
			Expect(got["riderId"]).To(Equal(rest["rider_id"]))
			Expect(got["createdAt"]).To(Equal(rest["created_at"]))
			Expect(got["updatedAt"]).To(Equal(rest["updated_at"]))
			Expect(got["pickupTime"]).To(Equal(rest["pickup_time"]))
			Expect(got["completedAt"]).To(BeNil())
			Expect(got["cancelledAt"]).To(BeNil())
			Expect(got["pickup"]).To(Equal(rest["pickup"]))
			Expect(got["dropoff"]).To(Equal(map[string]any{"lat": rest["dropoff"].(map[string]any)["lat"],
				"lng": rest["dropoff"].(map[string]any)["lng"], "address": nil}))
			Expect(got["driver"]).To(Equal(map[string]any{"id": driver.ID}))
		})

		It("works over GET, with an ETag and 304 like every GET", func() {
			res := h.GQLGet(h.Admin, map[string]string{"query": seedQuery, "variables": `{"id":"` + trip.ID + `"}`, "operationName": "Trip"})
			Expect(res.Status).To(Equal(200))
			answer := gqlDecode(res)
			Expect(answer.Errors).To(BeEmpty())
			Expect(answer.Data["trip"].(map[string]any)["status"]).To(Equal("ARRIVING"))
			etag := res.Header.Get("ETag")
			Expect(etag).NotTo(BeEmpty())
			again := h.GQLGet(h.Admin, map[string]string{"query": `{ trip(id: "` + trip.ID + `") { status etaMinutes driver { name rating photo } fare { total currency } } }`})
			Expect(again.Status).To(Equal(200))
			Expect(gqlDecode(again).Data).To(Equal(answer.Data))
			cached := h.Do(Request{Method: http.MethodGet, Key: h.Admin, Header: map[string]string{"If-None-Match": etag},
				Path: "/v1/graphql?" + gqlParams(map[string]string{"query": seedQuery, "variables": `{"id":"` + trip.ID + `"}`, "operationName": "Trip"})})
			Expect(cached.Status).To(Equal(304))
		})
	})

	Describe("the schema", func() {
		It("is introspectable and shows the seed's non-null kinds", func() {
			answer := h.Query(h.Admin, `{ __type(name: "Trip") { fields { name type { kind name ofType { kind name } } } } }`, nil)
			Expect(answer.Errors).To(BeEmpty())
			kinds := map[string]string{}
			for _, f := range answer.Data["__type"].(map[string]any)["fields"].([]any) {
				field := f.(map[string]any)
				t := field["type"].(map[string]any)
				if t["kind"] == "NON_NULL" {
					kinds[field["name"].(string)] = t["ofType"].(map[string]any)["name"].(string) + "!"
				} else {
					kinds[field["name"].(string)] = t["name"].(string)
				}
			}
			Expect(kinds).To(HaveKeyWithValue("id", "ID!"))
			Expect(kinds).To(HaveKeyWithValue("status", "TripStatus!"))
			Expect(kinds).To(HaveKeyWithValue("driver", "Driver!"))
			Expect(kinds).To(HaveKeyWithValue("fare", "Fare!"))
			Expect(kinds).To(HaveKeyWithValue("etaMinutes", "Int"))

			root := h.Query(h.Admin, `{ __type(name: "Query") { fields { name type { kind name } args { name type { kind ofType { name } } } } } }`, nil)
			fields := root.Data["__type"].(map[string]any)["fields"].([]any)
			tripField := fields[0].(map[string]any)
			Expect(tripField["name"]).To(Equal("trip"))
			Expect(tripField["type"]).To(Equal(map[string]any{"kind": "OBJECT", "name": "Trip"}), "trip(id: ID!): Trip is nullable")
			Expect(tripField["args"]).To(Equal([]any{map[string]any{"name": "id", "type": map[string]any{"kind": "NON_NULL", "ofType": map[string]any{"name": "ID"}}}}))

			enum := h.Query(h.Admin, `{ __type(name: "TripStatus") { enumValues { name } } }`, nil)
			Expect(enum.Data["__type"].(map[string]any)["enumValues"]).To(ContainElement(map[string]any{"name": "IN_PROGRESS"}))
		})

		It("answers the full introspection query of GraphiQL, with descriptions", func() {
			answer := h.Query(h.Admin, introspectionQuery, nil)
			Expect(answer.Errors).To(BeEmpty())
			Expect(answer.Extensions.Cost.Requested).To(BeNumerically("<", 1000))
			for _, t := range answer.Data["__schema"].(map[string]any)["types"].([]any) {
				typ := t.(map[string]any)
				name := typ["name"].(string)
				if strings.HasPrefix(name, "__") || isBuiltinScalar(name) {
					continue
				}
				Expect(typ["description"]).NotTo(BeEmpty(), "type %s", name)
				fields, _ := typ["fields"].([]any)
				for _, f := range fields {
					Expect(f.(map[string]any)["description"]).NotTo(BeEmpty(), "field %s.%s", name, f.(map[string]any)["name"])
				}
			}
		})

		It("names no internal data", func() {
			sdl := strings.ToLower(schema.SDL)
			for _, hidden := range append(hiddenMembers, "routepolyline", "matchingscore", "driverpayout", "platformcost", "paymenttoken", "costbasis") {
				Expect(sdl).NotTo(ContainSubstring(strings.ReplaceAll(hidden, "_", "")), hidden)
			}
			answer := h.Query(h.Admin, `{ __type(name: "Driver") { fields { name } } }`, nil)
			Expect(answer.Data["__type"].(map[string]any)["fields"]).To(ConsistOf(
				map[string]any{"name": "id"}, map[string]any{"name": "name"}, map[string]any{"name": "rating"}, map[string]any{"name": "photo"}),
				"the driver's position is internal")
		})
	})

	Describe("permissions", func() {
		It("answers another rider's trip with null and FORBIDDEN, like REST's 403, and another driver's with null alone, like REST's 404", func() {
			res := h.GQL(h.Key(auth.RoleRider, h.NewRider().ID), map[string]any{"query": seedQuery, "variables": map[string]any{"id": trip.ID}})
			Expect(res.Status).To(Equal(200))
			answer := gqlDecode(res)
			Expect(answer.Data).To(Equal(map[string]any{"trip": nil}))
			Expect(answer.Codes()).To(Equal([]string{"FORBIDDEN"}))
			Expect(answer.Errors[0].Path).To(Equal([]any{"trip"}))
			Expect(answer.Errors[0].Message).To(Equal("This trip belongs to another rider or driver."))

			// A driver reaches only the trips they drive.
			res = h.GQL(h.Key(auth.RoleDriver, h.NewDriver(DriverOpts{}).ID), map[string]any{"query": seedQuery, "variables": map[string]any{"id": trip.ID}})
			Expect(res.Status).To(Equal(200))
			answer = gqlDecode(res)
			Expect(answer.Data).To(Equal(map[string]any{"trip": nil}))
			Expect(answer.Errors).To(BeEmpty())
		})

		It("answers an unknown trip with null and no error", func() {
			for _, id := range []string{"trp_aaaaaaaaaaaaaaaaaaaaaaaaaa", "not-an-id", strings.Repeat("x", 500), "12"} {
				answer := h.Query(h.Admin, `query($id: ID!) { trip(id: $id) { id } }`, map[string]any{"id": id})
				Expect(answer.Errors).To(BeEmpty(), id)
				Expect(answer.Data).To(Equal(map[string]any{"trip": nil}), id)
			}
			answer := h.Query(h.Admin, `{ driver(id: "drv_aaaaaaaaaaaaaaaaaaaaaaaaaa") { name } }`, nil)
			Expect(answer.Errors).To(BeEmpty())
			Expect(answer.Data).To(Equal(map[string]any{"driver": nil}))
		})

		It("lets any caller read a driver's public profile, as REST does", func() {
			answer := h.Query(h.Key(auth.RoleRider, h.NewRider().ID), `query($id: ID!) { driver(id: $id) { id name rating photo } }`, map[string]any{"id": driver.ID})
			Expect(answer.Errors).To(BeEmpty())
			Expect(answer.Data["driver"]).To(Equal(map[string]any{"id": driver.ID, "name": driver.Name, "rating": driver.Rating, "photo": driver.Photo}))
		})

		It("answers 401 problem+json without a valid key, on POST and GET", func() {
			for _, key := range []string{"", "rk_not_a_key"} {
				res := h.GQL(key, map[string]any{"query": "{ __typename }"})
				Expect(res.Status).To(Equal(401))
				Expect(res.Problem().Code).To(Equal("unauthenticated"))
				res = h.GQLGet(key, map[string]string{"query": "{ __typename }"})
				Expect(res.Status).To(Equal(401))
				Expect(res.Problem().Code).To(Equal("unauthenticated"))
			}
		})
	})

	Describe("limits and malformed requests", func() {
		expectRejected := func(res *Response, code string) GraphQLAnswer {
			GinkgoHelper()
			Expect(res.Status).To(Equal(400), "body: %s", res.Body)
			answer := gqlDecode(res)
			Expect(answer.Data).To(BeNil())
			Expect(answer.Codes()).To(ContainElement(code), "body: %s", res.Body)
			return answer
		}

		It("rejects a document deeper than 10, before running it", func() {
			deep := `{ trip(id: "` + trip.ID + `") { driver { a { b { c { d { e { f { g { h { i } } } } } } } } } } }`
			answer := expectRejected(h.GQL(h.Admin, map[string]any{"query": deep}), "QUERY_TOO_DEEP")
			Expect(answer.Errors[0].Message).To(ContainSubstring("11 deep; the limit is 10"))
			answer = expectRejected(h.GQL(h.Admin, map[string]any{"query": `{ __schema { types { fields { type {` + strings.Repeat(" ofType {", 17) + " name " + strings.Repeat("}", 17) + ` } } } } }`}), "QUERY_TOO_DEEP")
			Expect(answer.Errors[0].Message).To(ContainSubstring("the limit is 20"))
			cyclic := `{ __schema { types { fields { type { ofType { fields { type { ofType { fields { name } } } } } } } } } }`
			expectRejected(h.GQL(h.Admin, map[string]any{"query": cyclic}), "QUERY_TOO_DEEP")
			ok := h.Query(h.Admin, `{ trip(id: "`+trip.ID+`") { driver { name } } }`, nil)
			Expect(ok.Errors).To(BeEmpty())
		})

		It("rejects a document over 10,000 characters, counting characters, not bytes", func() {
			doc := "{ __typename }\n#"
			expectRejected(h.GQL(h.Admin, map[string]any{"query": doc + strings.Repeat("x", 10_001-len(doc))}), "QUERY_TOO_LONG")
			multibyte := doc + strings.Repeat("é", 10_000-len(doc))
			answer := h.Query(h.Admin, multibyte, nil)
			Expect(answer.Errors).To(BeEmpty(), "10,000 characters of 2 bytes each are within the limit")
		})

		It("rejects a document selecting more than 1,000 fields, fragments expanded", func() {
			fragment := `fragment T on Trip { id status rideType city riderId etaMinutes pickupTime createdAt updatedAt completedAt cancelledAt
				driver { id name rating photo } fare { total currency } pickup { lat lng address } dropoff { lat lng address } }`
			doc := func(n int) string {
				return "{ " + aliases(n, func(int) string { return `trip(id: "` + trip.ID + `") { ...T }` }) + " }\n" + fragment
			}
			answer := h.Query(h.Admin, doc(35), nil)
			Expect(answer.Errors).To(BeEmpty())
			Expect(answer.Extensions.Cost.Requested).To(Equal(35 * 28))

			answer = expectRejected(h.GQL(h.Admin, map[string]any{"query": doc(36)}), "QUERY_TOO_COMPLEX")
			Expect(answer.Extensions.Cost.Requested).To(Equal(36 * 28))
			Expect(answer.Errors[0].Message).To(ContainSubstring("1008 fields; the limit is 1000"))

			var bomb strings.Builder
			bomb.WriteString("{ ...F0 }\n")
			for i := 0; i < 40; i++ {
				fmt.Fprintf(&bomb, "fragment F%d on Query { ...A%d ...B%d }\n", i, i, i)
				fmt.Fprintf(&bomb, "fragment A%d on Query { ...F%d }\nfragment B%d on Query { ...F%d }\n", i, i+1, i, i+1)
			}
			bomb.WriteString("fragment F40 on Query { __typename }")
			answer = expectRejected(h.GQL(h.Admin, map[string]any{"query": bomb.String()}), "QUERY_TOO_COMPLEX")
			Expect(answer.Extensions.Cost.Requested).To(Equal(1<<31-1), "the count saturates instead of overflowing")
		})

		It("runs a field repeated 990 times once, and counts it once", func() {
			doc := `{ driver(id: "` + driver.ID + `") {` + strings.Repeat("\n  name", 990) + "\n  photo\n  nope\n} }"
			res := h.GQL(h.Admin, map[string]any{"query": doc})
			answer := expectRejected(res, "GRAPHQL_VALIDATION_FAILED")
			Expect(answer.Errors).To(HaveLen(1))
			Expect(answer.Errors[0].Locations).To(HaveLen(1))
			Expect(answer.Errors[0].Locations[0].Line).To(Equal(993), "errors point into the document as sent: %s", res.Body)
			Expect(answer.Errors[0].Locations[0].Column).To(Equal(3), "errors point into the document as sent: %s", res.Body)

			doc = `{ driver(id: "` + driver.ID + `") {` + strings.Repeat(" name", 990) + ` } }`
			answer = gqlDecode(h.GQL(h.Admin, map[string]any{"query": doc}))
			Expect(answer.Errors).To(BeEmpty())
			Expect(answer.Extensions.Cost.Requested).To(Equal(2))
			Expect(answer.Data).To(Equal(map[string]any{"driver": map[string]any{"name": driver.Name}}))
		})

		It("names one conflict of a document of conflicting fields, and refuses one of too many fragments side by side", func() {
			var conflicting strings.Builder
			conflicting.WriteString("{")
			for i := range 300 {
				fmt.Fprintf(&conflicting, ` a: driver(id: "%d") { name }`, i)
			}
			conflicting.WriteString(" }")
			answer := expectRejected(h.GQL(h.Admin, map[string]any{"query": conflicting.String()}), "GRAPHQL_VALIDATION_FAILED")
			Expect(answer.Errors).To(HaveLen(1))
			Expect(answer.Errors[0].Message).To(ContainSubstring(`Fields "a" conflict because they have differing arguments`))

			var fragments strings.Builder
			fragments.WriteString(`{ driver(id: "` + driver.ID + `") {`)
			for i := range 600 {
				fmt.Fprintf(&fragments, ` ...{a%d:name}`, i)
			}
			fragments.WriteString(" } }")
			answer = expectRejected(h.GQL(h.Admin, map[string]any{"query": fragments.String()}), "QUERY_TOO_COMPLEX")
			Expect(answer.Errors[0].Message).To(ContainSubstring("comparisons"))
		})

		It("lists at most 50 errors, and says how many more there were", func() {
			doc := `{ driver(id: "` + driver.ID + `") {` + aliases(120, func(i int) string { return fmt.Sprintf("nope%d", i) }) + ` } }`
			answer := expectRejected(h.GQL(h.Admin, map[string]any{"query": doc}), "GRAPHQL_VALIDATION_FAILED")
			Expect(answer.Errors).To(HaveLen(51))
			Expect(answer.Errors[50].Message).To(Equal("70 more errors are not listed; an answer lists the first 50."))
		})

		It("rejects malformed and invalid documents with GraphQL errors, never a 5xx", func() {
			expectRejected(h.GQL(h.Admin, map[string]any{"query": `{ trip(id: "x" { id }`}), "GRAPHQL_PARSE_FAILED")
			expectRejected(h.GQLGet(h.Admin, map[string]string{"query": `{ trip(`}), "GRAPHQL_PARSE_FAILED")
			expectRejected(h.GQL(h.Admin, map[string]any{"query": `{ trip(id: "x") { nope } }`}), "GRAPHQL_VALIDATION_FAILED")
			expectRejected(h.GQL(h.Admin, map[string]any{"query": `{ trip { id } }`}), "GRAPHQL_VALIDATION_FAILED")
			expectRejected(h.GQL(h.Admin, map[string]any{"query": `{ trip(id: "x") }`}), "GRAPHQL_VALIDATION_FAILED")
			expectRejected(h.GQL(h.Admin, map[string]any{"query": `{ ...A } fragment A on Query { ...B } fragment B on Query { ...A }`}), "GRAPHQL_VALIDATION_FAILED")
			expectRejected(h.GQL(h.Admin, map[string]any{"query": `query A { __typename } query B { __typename }`}), "OPERATION_RESOLUTION_FAILURE")
			expectRejected(h.GQL(h.Admin, map[string]any{"query": `query A { __typename }`, "operationName": "Nope"}), "OPERATION_RESOLUTION_FAILURE")
			expectRejected(h.GQL(h.Admin, map[string]any{"query": `mutation { cancelTrip }`}), "BAD_REQUEST")
			expectRejected(h.GQLGet(h.Admin, map[string]string{"query": `subscription { trip }`}), "BAD_REQUEST")
			expectRejected(h.GQL(h.Admin, map[string]any{}), "BAD_REQUEST")
			expectRejected(h.GQL(h.Admin, map[string]any{"query": ""}), "BAD_REQUEST")
		})

		It("rejects variables that do not fit the operation", func() {
			q := `query($id: ID!) { trip(id: $id) { id } }`
			expectRejected(h.GQL(h.Admin, map[string]any{"query": q}), "BAD_USER_INPUT")
			expectRejected(h.GQL(h.Admin, map[string]any{"query": q, "variables": map[string]any{"id": nil}}), "BAD_USER_INPUT")
			answer := expectRejected(h.GQL(h.Admin, map[string]any{"query": q, "variables": map[string]any{"id": map[string]any{"a": 1}}}), "BAD_USER_INPUT")
			Expect(answer.Errors[0].Message).To(Equal("an ID is a string or an integer, not an object"))
			expectRejected(h.GQL(h.Admin, map[string]any{"query": q, "variables": map[string]any{"id": 1.5}}), "BAD_USER_INPUT")
			expectRejected(h.GQLGet(h.Admin, map[string]string{"query": q, "variables": `{"id": "x"`}), "BAD_USER_INPUT")
			expectRejected(h.GQLGet(h.Admin, map[string]string{"query": q, "variables": `["x"]`}), "BAD_USER_INPUT")
			expectRejected(h.GQLGet(h.Admin, map[string]string{"query": "{ __typename }", "extensions": `{"persistedQuery": 5}`}), "BAD_REQUEST")

			numeric := h.Query(h.Admin, q, map[string]any{"id": 12})
			Expect(numeric.Errors).To(BeEmpty(), "an integer is a valid ID")
		})

		It("answers a malformed HTTP request with a problem, like every route", func() {
			res := h.Do(Request{Method: http.MethodPost, Path: "/v1/graphql", Key: h.Admin, Body: `{"query": `})
			Expect(res.Status).To(Equal(400))
			Expect(res.Problem().Code).To(Equal("malformed_json"))

			res = h.GQL(h.Admin, map[string]any{"query": "{ __typename }", "variables": "not an object"})
			Expect(res.Status).To(Equal(400))
			Expect(res.Problem().Code).To(Equal("invalid_request"))

			res = h.Do(Request{Method: http.MethodPost, Path: "/v1/graphql", Key: h.Admin,
				Body: `{"query": "{ __typename }", "padding": "` + strings.Repeat("x", 1<<20) + `"}`})
			Expect(res.Status).To(Equal(413))
			Expect(res.Problem().Code).To(Equal("body_too_large"))

			res = h.GQLGet(h.Admin, map[string]string{"query": "{ __typename }", "colour": "red"})
			Expect(res.Status).To(Equal(400))
			Expect(res.Problem().Code).To(Equal("invalid_request"))
		})
	})

	Describe("automatic persisted queries", func() {
		It("registers a document under its hash and serves it by hash, on every replica", func() {
			query := seedQuery + " # " + trip.ID // a document no other spec registered
			hash := sha256Hex(query)
			persisted := map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": hash}}
			variables := map[string]any{"id": trip.ID}

			res := h.GQL(h.Admin, map[string]any{"variables": variables, "extensions": persisted})
			Expect(res.Status).To(Equal(200))
			miss := gqlDecode(res)
			Expect(miss.Data).To(BeNil())
			Expect(miss.Codes()).To(Equal([]string{"PERSISTED_QUERY_NOT_FOUND"}))
			Expect(miss.Errors[0].Message).To(Equal("PersistedQueryNotFound"))

			res = h.GQL(h.Admin, map[string]any{"query": query, "variables": variables, "extensions": persisted})
			Expect(res.Status).To(Equal(200))
			registered := gqlDecode(res)
			Expect(registered.Errors).To(BeEmpty())
			stored, err := h.Store.PersistedQueryByHash(context.Background(), auth.DefaultAccount, hash, time.Now().Add(-time.Hour))
			Expect(err).NotTo(HaveOccurred())
			Expect(stored.Query).To(Equal(query))

			served := gqlDecode(h.GQL(h.Admin, map[string]any{"variables": variables, "extensions": persisted}))
			Expect(served.Errors).To(BeEmpty())
			Expect(served.Data).To(Equal(registered.Data))

			get := h.GQLGet(h.Admin, map[string]string{"variables": `{"id":"` + trip.ID + `"}`,
				"extensions": `{"persistedQuery":{"version":1,"sha256Hash":"` + strings.ToUpper(hash) + `"}}`})
			Expect(get.Status).To(Equal(200))
			Expect(gqlDecode(get).Data).To(Equal(registered.Data), "GET by hash, any hex case")

			replica, err := server.New(testDefaults(server.Config{}), server.Deps{Store: h.Store})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(replica.Close)
			body, _ := json.Marshal(map[string]any{"variables": variables, "extensions": persisted})
			req, _ := http.NewRequest(http.MethodPost, "/v1/graphql", strings.NewReader(string(body)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+h.Admin)
			rec := httptest.NewRecorder()
			replica.ServeHTTP(rec, req)
			Expect(rec.Code).To(Equal(200))
			Expect(rec.Body.String()).To(ContainSubstring(`"status":"ARRIVING"`), "a replica with a cold cache reads the registration from the database")
		})

		It("are registered per account: another account's hash is unknown, as if never sent", func() {
			query := seedQuery + " # registered by one account " + trip.ID
			hash := sha256Hex(query)
			persisted := map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": hash}}
			variables := map[string]any{"id": trip.ID}
			res := h.GQL(h.Admin, map[string]any{"query": query, "variables": variables, "extensions": persisted})
			Expect(gqlDecode(res).Errors).To(BeEmpty())
			Expect(gqlDecode(h.GQL(h.Admin, map[string]any{"variables": variables, "extensions": persisted})).Errors).To(BeEmpty())

			other := h.KeyIn(auth.RoleAdmin, "", newAccount("apq"))
			miss := gqlDecode(h.GQL(other, map[string]any{"variables": variables, "extensions": persisted}))
			Expect(miss.Codes()).To(Equal([]string{"PERSISTED_QUERY_NOT_FOUND"}))
			// Its own registration of the same text is its own, and serves it.
			Expect(gqlDecode(h.GQL(other, map[string]any{"query": query, "variables": variables, "extensions": persisted})).Codes()).To(BeEmpty())
			Expect(gqlDecode(h.GQL(other, map[string]any{"variables": variables, "extensions": persisted})).Codes()).To(BeEmpty())
		})

		It("keeps a registration 7 days after the latest one, whichever replica received it", func() {
			clock := NewFakeClock(time.Now())
			a, b := h.WithClock(clock.Now), h.WithClock(clock.Now)
			query := fmt.Sprintf("query Renewed%d { __typename }", time.Now().UnixNano())
			hash := sha256Hex(query)
			persisted := map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": hash}}
			byHash := func(on *Harness) string {
				res := on.GQL(h.Admin, map[string]any{"extensions": persisted})
				Expect(res.Status).To(Equal(200), "%s", res.Body)
				if errs := gqlDecode(res).Errors; len(errs) > 0 {
					return errs[0].Extensions["code"].(string)
				}
				return "served"
			}

			Expect(a.GQL(h.Admin, map[string]any{"query": query, "extensions": persisted}).Status).To(Equal(200))
			Expect(byHash(a)).To(Equal("served"))
			Expect(byHash(b)).To(Equal("served"), "b now holds the registration in its cache")

			clock.Advance(3 * 24 * time.Hour)
			Expect(b.GQL(h.Admin, map[string]any{"query": query, "extensions": persisted}).Status).To(Equal(200),
				"registered again, through the replica that had it cached")
			clock.Advance(5 * 24 * time.Hour) // 8 days after the first registration, 5 after the latest
			Expect(byHash(a)).To(Equal("served"))
			Expect(byHash(b)).To(Equal("served"))
			clock.Advance(3 * 24 * time.Hour) // 8 days after the latest
			Expect(byHash(a)).To(Equal("PERSISTED_QUERY_NOT_FOUND"))
		})

		It("refuses a hash that does not match the document, and an unknown protocol version", func() {
			query := "{ __typename }"
			wrong := map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": sha256Hex("{ other }")}}
			res := h.GQL(h.Admin, map[string]any{"query": query, "extensions": wrong})
			Expect(res.Status).To(Equal(400))
			Expect(gqlDecode(res).Codes()).To(Equal([]string{"PERSISTED_QUERY_HASH_MISMATCH"}))

			v2 := map[string]any{"persistedQuery": map[string]any{"version": 2, "sha256Hash": sha256Hex(query)}}
			res = h.GQL(h.Admin, map[string]any{"query": query, "extensions": v2})
			Expect(res.Status).To(Equal(400))
			Expect(gqlDecode(res).Codes()).To(Equal([]string{"BAD_REQUEST"}))

			res = h.GQL(h.Admin, map[string]any{"query": query, "extensions": map[string]any{"persistedQuery": map[string]any{"version": 1}}})
			Expect(res.Status).To(Equal(400))
			noHash := gqlDecode(res)
			Expect(noHash.Codes()).To(Equal([]string{"BAD_REQUEST"}))
			Expect(noHash.Errors[0].Message).To(HavePrefix("extensions.persistedQuery needs sha256Hash"), "the message names the member as the client spells it")

			res = h.GQL(h.Admin, map[string]any{"operationName": "Trip"})
			Expect(res.Status).To(Equal(400))
			noDocument := gqlDecode(res)
			Expect(noDocument.Codes()).To(Equal([]string{"BAD_REQUEST"}))
			Expect(noDocument.Errors[0].Message).To(ContainSubstring("in query (or the hash of a registered one in extensions.persistedQuery)"))

			invalid := "{ nope }"
			bad := map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": sha256Hex(invalid)}}
			res = h.GQL(h.Admin, map[string]any{"query": invalid, "extensions": bad})
			Expect(res.Status).To(Equal(400))
			_, err := h.Store.PersistedQueryByHash(context.Background(), auth.DefaultAccount, sha256Hex(invalid), time.Now().Add(-time.Hour))
			Expect(err).To(MatchError(store.ErrNotFound), "a document that cannot run is not registered")
		})
	})

	Describe("batching", func() {
		It("loads every trip and driver a document names in one query per type", func() {
			var trips []store.Trip
			var ids []string
			for i := 0; i < 5; i++ {
				t := h.NewTrip(TripOpts{Driver: h.NewDriver(DriverOpts{}), Rider: rider})
				trips = append(trips, t)
				ids = append(ids, t.ID, t.DriverID)
			}
			drivers := []store.Driver{h.NewDriver(DriverOpts{}), h.NewDriver(DriverOpts{}), h.NewDriver(DriverOpts{})}
			for _, d := range drivers {
				ids = append(ids, d.ID)
			}
			doc := "query($t4: ID!, $d2: ID!) {\n" +
				aliases(4, func(i int) string {
					return `trip(id: "` + trips[i].ID + `") { id driver { name rating } fare { total } }`
				}) +
				"last: trip(id: $t4) { ...TripDriver }\n" +
				`d0: driver(id: "` + drivers[0].ID + `") { name } d1: driver(id: "` + drivers[1].ID + `") { name } d2: driver(id: $d2) { name }` +
				"\n}\nfragment TripDriver on Trip { id driver { id name } }"

			log := h.watchQueries(ids...)
			answer := h.Query(h.Key(auth.RoleRider, rider.ID), doc, map[string]any{"t4": trips[4].ID, "d2": drivers[2].ID})
			Expect(answer.Errors).To(BeEmpty())
			for i := 0; i < 4; i++ {
				Expect(answer.Data[fmt.Sprintf("a%d", i)].(map[string]any)["driver"].(map[string]any)["name"]).To(Equal("Test Driver"))
			}
			Expect(answer.Data["last"].(map[string]any)["driver"].(map[string]any)["id"]).To(Equal(trips[4].DriverID))
			Expect(answer.Data["d2"]).To(Equal(map[string]any{"name": "Test Driver"}))
			Expect(log.Counts()).To(Equal([]string{"drivers=1", "trips=1"}),
				"5 trips with their drivers in one query, 3 drivers in another")

			log = h.watchQueries(ids...)
			single := h.Query(h.Admin, seedQuery, map[string]any{"id": trips[0].ID})
			Expect(single.Errors).To(BeEmpty())
			Expect(log.Counts()).To(Equal([]string{"trips=1"}), "the seed's query is one query, as GET /v1/trips/{id} is")
		})

		It("reads nothing for a request that does not run or skips the field, whoever ran the same document before", func() {
			trip := h.NewTrip(TripOpts{Driver: h.NewDriver(DriverOpts{}), Rider: rider})
			doc := `query($id: ID!, $with: Boolean!) { trip(id: $id) @include(if: $with) { id } }`
			Expect(h.Query(h.Admin, doc, map[string]any{"id": trip.ID, "with": true}).Errors).To(BeEmpty())

			// Another account's admin sends the same text: without its required variables
			// (refused before anything runs), and with the field left out.
			stranger := h.KeyIn(auth.RoleAdmin, "", newAccount("gql"))
			log := h.watchQueries(trip.ID)
			res := h.GQL(stranger, map[string]any{"query": doc, "variables": map[string]any{"id": trip.ID}})
			Expect(res.Status).To(Equal(http.StatusBadRequest))
			skipped := h.Query(stranger, doc, map[string]any{"id": trip.ID, "with": false})
			Expect(skipped.Errors).To(BeEmpty())
			Expect(skipped.Data).To(BeEmpty())
			Expect(log.Counts()).To(BeEmpty(), "the same work whether or not another account ran the document")
		})
	})
})

func isBuiltinScalar(name string) bool {
	switch name {
	case "String", "Int", "Float", "Boolean", "ID":
		return true
	}
	return false
}
