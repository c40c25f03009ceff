package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	graphql "github.com/graph-gophers/graphql-go"
	gqlerrors "github.com/graph-gophers/graphql-go/errors"
	gqllog "github.com/graph-gophers/graphql-go/log"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/schema"
)

// The query interface: POST and GET /v1/graphql run a document against schema/ride.graphql.
// The OpenAPI gate has already authenticated the caller and checked the request's shape; from
// here on every answer is the GraphQL envelope {errors, data, extensions}, 200 once the
// document ran and 400 when it cannot run. Order of work: resolve a persisted query, parse and
// measure the document (limits), then let graphql-go validate and execute it.

// graphQLMaxParallelism bounds the resolvers of one request that run at once.
const graphQLMaxParallelism = 10

// newGraphQLSchema parses the schema and binds the resolvers; a field without one fails here.
func newGraphQLSchema(s *Server) (*graphql.Schema, error) {
	sch, err := graphql.ParseSchema(schema.SDL, &graphQLQuery{s: s},
		graphql.UseStringDescriptions(),
		graphql.MaxParallelism(graphQLMaxParallelism),
		// analyzeDocument enforces the limits first; these are graphql-go's own backstops.
		graphql.MaxDepth(graphQLMaxIntrospectionDepth),
		graphql.MaxQueryLength(4*graphQLMaxLength),
		graphql.Logger(gqllog.LoggerFunc(func(ctx context.Context, value any) {
			s.log.ErrorContext(ctx, "graphql resolver panicked",
				slog.String("request_id", requestIDFrom(ctx)), slog.String("panic", fmt.Sprint(value)))
		})),
		graphql.PanicHandler(graphQLPanics{}),
	)
	if err != nil {
		return nil, fmt.Errorf("parse schema/ride.graphql: %w", err)
	}
	return sch, nil
}

// graphQLPanics answers a panicking resolver like any fault: INTERNAL, without the panic's text.
type graphQLPanics struct{}

// MakePanicError is the error a panicking resolver's field reports; the log has the panic.
func (graphQLPanics) MakePanicError(ctx context.Context, _ any) *gqlerrors.QueryError {
	return &gqlerrors.QueryError{
		Message:    "Something went wrong on our side. Retry with backoff; quote the request_id if it persists.",
		Extensions: map[string]any{"code": gqlCodeInternal, "request_id": requestIDFrom(ctx)},
	}
}

// graphQLRequest is a GraphQL request however it arrived.
type graphQLRequest struct {
	query         string
	operationName string
	variables     map[string]any
	persisted     *persistedQueryRef
}

// QueryGraphQL runs a query sent as URL parameters (GET /v1/graphql).
func (s *Server) QueryGraphQL(ctx context.Context, req gen.QueryGraphQLRequestObject) (gen.QueryGraphQLResponseObject, error) {
	p := req.Params
	r := graphQLRequest{query: deref(p.Query), operationName: deref(p.OperationName)}
	if p.Variables != nil {
		if err := json.Unmarshal([]byte(*p.Variables), &r.variables); err != nil {
			return graphQLFailure(ctx, newRequestError(gqlCodeBadUserInput, "variables must be a JSON object (URL-encoded JSON text)."), 0)
		}
	}
	if p.Extensions != nil {
		var ext gen.GraphQLRequestExtensions
		if err := json.Unmarshal([]byte(*p.Extensions), &ext); err != nil {
			return graphQLFailure(ctx, newRequestError(gqlCodeBadRequest,
				`extensions must be a JSON object such as {"persistedQuery":{"version":1,"sha256Hash":"…"}}.`), 0)
		}
		r.persisted = persistedRef(&ext)
	}
	return s.runGraphQL(ctx, r)
}

// ExecuteGraphQL runs a document sent as a JSON body (POST /v1/graphql).
func (s *Server) ExecuteGraphQL(ctx context.Context, req gen.ExecuteGraphQLRequestObject) (gen.ExecuteGraphQLResponseObject, error) {
	b := req.Body
	r := graphQLRequest{query: deref(b.Query), operationName: deref(b.OperationName), persisted: persistedRef(b.Extensions)}
	if b.Variables != nil {
		r.variables = *b.Variables
	}
	return s.runGraphQL(ctx, r)
}

func persistedRef(ext *gen.GraphQLRequestExtensions) *persistedQueryRef {
	if ext == nil || ext.PersistedQuery == nil {
		return nil
	}
	return &persistedQueryRef{version: deref(ext.PersistedQuery.Version), hash: deref(ext.PersistedQuery.Sha256Hash)}
}

// runGraphQL answers one request.
func (s *Server) runGraphQL(ctx context.Context, r graphQLRequest) (graphQLAnswer, error) {
	query, register := r.query, false
	if r.persisted != nil {
		var reqErr *requestError
		query, register, reqErr = s.resolvePersistedQuery(ctx, r)
		if reqErr != nil {
			return graphQLFailure(ctx, reqErr, 0)
		}
	}
	if query == "" {
		return graphQLFailure(ctx, newRequestError(gqlCodeBadRequest,
			"Send the GraphQL document in query (or the hash of a registered one in extensions.persistedQuery)."), 0)
	}
	analysis, reqErr := s.documents.analyze(query, r.operationName)
	if reqErr != nil {
		return graphQLFailure(ctx, reqErr, analysis.cost)
	}

	ctx = withGraphQLBatch(ctx, newGraphQLBatch(s.storeFor(ctx), analysis, r.variables))
	run, patch := rewriteIntrospection(analysis.doc, query, s.schemaDescription)
	res := s.graphql.Exec(ctx, run, r.operationName, r.variables)
	ran := graphQLRan(res)
	if ran && register {
		if err := s.persisted.register(ctx, s.storeFor(ctx), hashQuery(query), query); err != nil {
			s.log.ErrorContext(ctx, "persisted query registration failed",
				slog.String("request_id", requestIDFrom(ctx)), slog.String("error", err.Error()))
		}
	}
	env := graphQLEnvelope{
		Errors:     make([]graphQLError, 0, len(res.Errors)),
		Extensions: graphQLExtensions{Cost: graphQLCost{Requested: analysis.cost, Limit: graphQLMaxCost}},
	}
	for _, e := range res.Errors {
		env.Errors = append(env.Errors, graphQLErrorFrom(e, ran, len(res.Data) > 0))
	}
	if !ran {
		return env.answer(ctx, http.StatusBadRequest)
	}
	env.Data = patch.apply(res.Data)
	return env.answer(ctx, http.StatusOK)
}

// graphQLRan tells whether graphql-go executed the document. It answers validation failures
// without data, and an argument it cannot coerce (a variable of the wrong type that validation
// let through) with an error that has no path: both are errors of the request, not of a field.
func graphQLRan(res *graphql.Response) bool {
	if len(res.Data) == 0 || bytes.Equal(res.Data, []byte("null")) {
		return false
	}
	for _, e := range res.Errors {
		if _, coded := e.Extensions["code"]; len(e.Path) == 0 && !coded {
			return false
		}
	}
	return true
}

// graphQLErrorFrom gives an error of graphql-go its code. Resolver errors carry theirs. Of
// graphql-go's own, those before execution are syntax, validation or variable errors, those
// while binding arguments are variable errors, and those of a field (a null in a non-null
// field) are faults.
func graphQLErrorFrom(e *gqlerrors.QueryError, ran, executing bool) graphQLError {
	out := graphQLError{Message: e.Message, Locations: e.Locations, Path: e.Path, Extensions: e.Extensions}
	if _, ok := out.Extensions["code"]; ok {
		return out
	}
	var code string
	switch {
	case ran || len(e.Path) > 0:
		code = gqlCodeInternal
	case errors.Is(e.Err, gqlerrors.ErrSyntax):
		code = gqlCodeParseFailed
	case e.Rule == "VariablesOfCorrectType", executing && e.Rule == "":
		code = gqlCodeBadUserInput
	case e.Rule == "MaxDepthExceeded":
		code = gqlCodeTooDeep
	case e.Rule != "":
		code = gqlCodeValidationFailed
	default:
		code = gqlCodeBadRequest
	}
	ext := make(map[string]any, len(out.Extensions)+1)
	for k, v := range out.Extensions {
		ext[k] = v
	}
	ext["code"] = code
	out.Extensions = ext
	return out
}

// graphQLEnvelope is the standard GraphQL response; errors come first, as the specification
// recommends, so a reader sees them before a large result.
type graphQLEnvelope struct {
	Errors     []graphQLError    `json:"errors,omitempty"`
	Data       json.RawMessage   `json:"data,omitempty"`
	Extensions graphQLExtensions `json:"extensions"`
}

type graphQLError struct {
	Message    string               `json:"message"`
	Locations  []gqlerrors.Location `json:"locations,omitempty"`
	Path       []any                `json:"path,omitempty"`
	Extensions map[string]any       `json:"extensions"`
}

type graphQLExtensions struct {
	Cost graphQLCost `json:"cost"`
}

// graphQLCost is Shopify's extensions.cost, reduced to what this API measures.
type graphQLCost struct {
	Requested int `json:"requested"`
	Limit     int `json:"limit"`
}

// graphQLFailure answers a request error found before execution: 400, except an unknown
// persisted query, which Apollo's clients expect as 200 and answer by sending the document.
func graphQLFailure(ctx context.Context, e *requestError, cost int) (graphQLAnswer, error) {
	status := http.StatusBadRequest
	if e.code == gqlCodePersistedQueryNotFound {
		status = http.StatusOK
	}
	env := graphQLEnvelope{
		Errors:     []graphQLError{{Message: e.message, Locations: e.locations, Extensions: map[string]any{"code": e.code}}},
		Extensions: graphQLExtensions{Cost: graphQLCost{Requested: cost, Limit: graphQLMaxCost}},
	}
	return env.answer(ctx, status)
}

// answer encodes the envelope as the media type the client prefers: application/json, or
// application/graphql-response+json (GraphQL over HTTP), with the same body and statuses.
func (env graphQLEnvelope) answer(ctx context.Context, status int) (graphQLAnswer, error) {
	body, err := json.Marshal(env)
	if err != nil {
		return graphQLAnswer{}, fmt.Errorf("encode GraphQL answer: %w", err)
	}
	contentType := headerJSON
	if mediaTypeFrom(ctx) == mediaGraphQLResponse {
		contentType = headerGraphQLResponse
	}
	return graphQLAnswer{status: status, body: body, contentType: contentType}, nil
}

// mediaGraphQLResponse is the media type of the GraphQL over HTTP specification.
const mediaGraphQLResponse = "application/graphql-response+json"

var headerGraphQLResponse = []string{mediaGraphQLResponse}

// graphQLAnswer writes an encoded envelope. The generated typed responses would decode data
// into a map, which loses the field order the document asked for.
type graphQLAnswer struct {
	status      int
	body        []byte
	contentType []string
}

func (a graphQLAnswer) write(w http.ResponseWriter) error {
	w.Header()["Content-Type"] = a.contentType
	w.WriteHeader(a.status)
	_, err := w.Write(a.body)
	return err
}

// VisitQueryGraphQLResponse writes the answer to GET /v1/graphql.
func (a graphQLAnswer) VisitQueryGraphQLResponse(w http.ResponseWriter) error { return a.write(w) }

// VisitExecuteGraphQLResponse writes the answer to POST /v1/graphql.
func (a graphQLAnswer) VisitExecuteGraphQLResponse(w http.ResponseWriter) error { return a.write(w) }
