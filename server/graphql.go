package server

import (
	"context"
	"net/http"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/auth"
	graphqlapi "github.com/rideapi/ride/server/graphql"
	"github.com/rideapi/ride/server/pipeline"
	"github.com/rideapi/ride/store"
)

// The HTTP side of /v1/graphql: the query interface itself is server/graphql.

// QueryGraphQL runs a query sent as URL parameters (GET /v1/graphql).
func (s *Server) QueryGraphQL(ctx context.Context, req gen.QueryGraphQLRequestObject) (gen.QueryGraphQLResponseObject, error) {
	a, err := s.graphql.Get(ctx, req.Params)
	return graphQLAnswer{a, graphQLContentType(ctx)}, err
}

// ExecuteGraphQL runs a document sent as a JSON body (POST /v1/graphql).
func (s *Server) ExecuteGraphQL(ctx context.Context, req gen.ExecuteGraphQLRequestObject) (gen.ExecuteGraphQLResponseObject, error) {
	a, err := s.graphql.Post(ctx, req.Body)
	return graphQLAnswer{a, graphQLContentType(ctx)}, err
}

// mediaGraphQLResponse is the media type of the GraphQL over HTTP specification.
const mediaGraphQLResponse = "application/graphql-response+json"

var headerGraphQLResponse = []string{mediaGraphQLResponse}

// graphQLContentType is the media type the client prefers: application/json, or
// application/graphql-response+json (GraphQL over HTTP), with the same body and statuses.
func graphQLContentType(ctx context.Context) []string {
	if pipeline.MediaType(ctx) == mediaGraphQLResponse {
		return headerGraphQLResponse
	}
	return headerJSON
}

// graphQLAnswer writes an encoded envelope as it is: the generated typed responses would
// decode data into a map, which loses the field order the document asked for.
type graphQLAnswer struct {
	graphqlapi.Answer
	contentType []string
}

func (a graphQLAnswer) write(w http.ResponseWriter) error {
	w.Header()["Content-Type"] = a.contentType
	w.WriteHeader(a.Status)
	_, err := w.Write(a.Body)
	return err
}

// VisitQueryGraphQLResponse writes the answer to GET /v1/graphql.
func (a graphQLAnswer) VisitQueryGraphQLResponse(w http.ResponseWriter) error { return a.write(w) }

// VisitExecuteGraphQLResponse writes the answer to POST /v1/graphql.
func (a graphQLAnswer) VisitExecuteGraphQLResponse(w http.ResponseWriter) error { return a.write(w) }

// graphQLHost gives the query interface the request's store, the caller's rules and the
// request id, as every REST handler has them.
type graphQLHost struct{ s *Server }

func (h graphQLHost) Store(ctx context.Context) *store.Store { return h.s.storeFor(ctx) }

func (h graphQLHost) ETAMinutes(t *store.Trip) *int { return liveETA(t) }

func (h graphQLHost) TripAccess(ctx context.Context, t store.Trip) (exists, readable bool) {
	p := auth.PrincipalFrom(ctx)
	return inReach(p, t), canSeeTrip(p, t)
}

func (h graphQLHost) RequestID(ctx context.Context) string { return pipeline.RequestID(ctx) }
