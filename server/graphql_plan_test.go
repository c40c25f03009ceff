package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/demo"
	graphqlapi "github.com/rideapi/ride/server/graphql"
	"github.com/rideapi/ride/server/pipeline"
	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/store/storetest"
)

// A plain document runs by a plan instead of through graphql-go (server/graphql/plan.go). The
// plan must be invisible: for every caller and every trip of the demo data, the server's
// answer is byte for byte the answer of a handler that runs everything through graphql-go.
var _ = Describe("GraphQL plans", Ordered, func() {
	var (
		s      *Server
		ref    *graphqlapi.Handler
		trips  []store.Trip
		driver string
	)

	BeforeAll(func(ctx SpecContext) {
		url := "sqlite://" + filepath.Join(GinkgoT().TempDir(), "ride.db")
		if base := os.Getenv("TEST_DATABASE_URL"); base != "" {
			var drop func()
			var err error
			url, drop, err = storetest.NewPostgresDatabase(ctx, base)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(drop)
		}
		st, err := store.Open(ctx, url)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(st.Close)
		Expect(st.Migrate(ctx)).To(Succeed())
		_, err = demo.Seed(ctx, st, time.Now())
		Expect(err).NotTo(HaveOccurred())
		log := slog.New(slog.NewJSONHandler(io.Discard, nil))
		s, err = New(Config{CursorSecret: []byte("plan-test-secret-0123456789")}, Deps{Store: st, Logger: log})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(s.Close)
		ref, err = graphqlapi.New(graphqlapi.Config{Host: graphQLHost{s}, Logger: log, Now: time.Now, WithoutPlans: true})
		Expect(err).NotTo(HaveOccurred())

		page, err := st.ListTrips(ctx, store.TripListParams{Limit: 100, Filter: store.TripFilter{Account: auth.DefaultAccount}})
		Expect(err).NotTo(HaveOccurred())
		trips = page.Trips
		statuses := map[string]bool{}
		for _, t := range trips {
			statuses[t.Status] = true
		}
		Expect(statuses).To(HaveLen(5), "the demo data has trips in every status")
		driver = trips[0].DriverID
		// A name json.Marshal escapes (HTML characters, a quote, a line break, beyond ASCII).
		Expect(storetest.SetDriverName(ctx, st, driver, "Zoë <\"Z\"> & co\n\u2028")).To(Succeed())
		Expect(storetest.SetTripETA(ctx, st, trips[1].ID, 7)).To(Succeed())
	})

	// same runs a document as caller on the server and on the reference, and expects the same
	// status and bytes; it returns the body.
	same := func(ctx context.Context, caller auth.Principal, query string, variables map[string]any) string {
		GinkgoHelper()
		Expect(s.graphql.Planned(caller.Account, query, "")).To(BeTrue(), "the document runs by a plan: %s", query)
		ctx = pipeline.WithRequestID(auth.WithPrincipal(ctx, caller), "req_plan")
		req := &gen.GraphQLRequest{Query: &query}
		if variables != nil {
			v := gen.GraphQLVariableValues(variables)
			req.Variables = &v
		}
		got, err := s.graphql.Post(ctx, req)
		Expect(err).NotTo(HaveOccurred())
		want, err := ref.Post(ctx, req)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(got.Body)).To(Equal(string(want.Body)))
		Expect(got.Status).To(Equal(want.Status))
		return string(got.Body)
	}

	everyField := `query Trip($id: ID!) { __typename trip(id: $id) { __typename id status rideType city riderId
		driver { __typename id name rating photo } pickup { lat lng address } dropoff { lat lng address }
		pickupTime fare { total currency } etaMinutes driverLocation { lat lng heading speed recordedAt }
		createdAt updatedAt completedAt cancelledAt } }`

	It("answers every field of every trip as graphql-go does, for its admin, its rider, its driver and another rider", func(ctx SpecContext) {
		admin := auth.Principal{KeyID: "key_admin", Role: auth.RoleAdmin, Account: auth.DefaultAccount}
		forbidden := 0
		for _, t := range trips {
			callers := []auth.Principal{admin,
				{KeyID: "key_rider", Role: auth.RoleRider, Subject: t.RiderID, Account: auth.DefaultAccount},
				{KeyID: "key_driver", Role: auth.RoleDriver, Subject: t.DriverID, Account: auth.DefaultAccount},
				{KeyID: "key_other", Role: auth.RoleRider, Subject: "rdr_someoneelse", Account: auth.DefaultAccount},
			}
			for _, caller := range callers {
				body := same(ctx, caller, everyField, map[string]any{"id": t.ID})
				var answer struct {
					Errors []struct{ Extensions struct{ Code string } }
				}
				Expect(json.Unmarshal([]byte(body), &answer)).To(Succeed())
				if len(answer.Errors) > 0 {
					Expect(answer.Errors[0].Extensions.Code).To(Equal("FORBIDDEN"))
					forbidden++
				}
			}
		}
		Expect(forbidden).To(Equal(len(trips)), "the other rider is refused every trip, with the error graphql-go writes")
	})

	It("answers another account's admin and another account's driver as if no trip had the id, as graphql-go does", func(ctx SpecContext) {
		strangers := []auth.Principal{
			{KeyID: "key_stranger", Role: auth.RoleAdmin, Account: "acct_stranger"},
			{KeyID: "key_stranger_driver", Role: auth.RoleDriver, Subject: "drv_notthisone", Account: "acct_stranger"},
		}
		for _, stranger := range strangers {
			for _, t := range trips {
				body := same(ctx, stranger, everyField, map[string]any{"id": t.ID})
				Expect(body).To(HavePrefix(`{"data":{"__typename":"Query","trip":null}`), "no error, no field of the trip")
			}
		}
	})

	It("names a refused field in its error by its response key, as graphql-go does", func(ctx SpecContext) {
		rider := auth.Principal{KeyID: "key_rider", Role: auth.RoleRider, Subject: "rdr_someoneelse", Account: auth.DefaultAccount}
		// One refusal per document: graphql-go resolves root fields concurrently, so the order
		// of several errors is its scheduler's.
		body := same(ctx, rider, `query Q($a: ID!, $b: ID!) { driver: trip(id: $a) { id } trip: driver(id: $b) { id } }`,
			map[string]any{"a": trips[0].ID, "b": driver})
		Expect(body).To(ContainSubstring(`"path":["driver"]`))
		body = same(ctx, rider, fmt.Sprintf(`{ x: trip(id: %q) { id } }`, trips[1].ID), nil)
		Expect(body).To(ContainSubstring(`"path":["x"]`))
	})

	It("answers aliases, literal ids, several root fields, unknown and malformed ids as graphql-go does", func(ctx SpecContext) {
		admin := auth.Principal{KeyID: "key_admin", Role: auth.RoleAdmin, Account: auth.DefaultAccount}
		docs := []struct {
			query     string
			variables map[string]any
		}{
			{fmt.Sprintf(`{ a: trip(id: %q) { s: status eta: etaMinutes } b: trip(id: %q) { status fare { total } } d: driver(id: %q) { name rating photo id } }`,
				trips[0].ID, trips[1].ID, driver), nil},
			{`{ trip(id: "trp_doesnotexist") { id } driver(id: "drv_doesnotexist") { id } }`, nil},
			{`{ trip(id: "not an id") { id } driver(id: "") { name } }`, nil},
			{`query Both($t: ID!, $d: ID!) { trip(id: $t) { driver { name } } driver(id: $d) { name } }`,
				map[string]any{"t": trips[2].ID, "d": driver}},
		}
		for _, d := range docs {
			same(ctx, admin, d.query, d.variables)
		}
	})
})
