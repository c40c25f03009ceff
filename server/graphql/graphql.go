// Package graphql is the query interface: POST and GET /v1/graphql run a document against
// schema/ride.graphql. The server's pipeline has already authenticated the caller and checked
// the request's shape; from here on every answer is the GraphQL envelope {errors, data,
// extensions}, 200 once the document ran and 400 when it cannot run. Order of work: resolve a
// persisted query, parse and measure the document (limits), then let graphql-go validate and
// execute it, or run its plan when graphql-go found it valid before and it is plain (plan.go).
// The server reaches it through Handler and gives it what it needs through Host.
package graphql

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"time"

	graphql "github.com/graph-gophers/graphql-go"
	gqlerrors "github.com/graph-gophers/graphql-go/errors"
	gqllog "github.com/graph-gophers/graphql-go/log"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/schema"
	"github.com/rideapi/ride/server/problem"
	"github.com/rideapi/ride/store"
)

// graphQLMaxParallelism bounds the resolvers of one request that run at once.
const graphQLMaxParallelism = 10

// Host is what the query interface needs from the server around it.
type Host interface {
	// Store is the store of the request (a transaction's, when one runs).
	Store(ctx context.Context) *store.Store
	// TripReach bounds the caller's reads of trips: a trip beyond it does not exist for the
	// caller (answered null), and costs what a missing one does.
	TripReach(ctx context.Context) store.TripReach
	// MayReadTrip says whether the caller may read a trip within its reach (false: FORBIDDEN).
	MayReadTrip(ctx context.Context, t store.Trip) bool
	// Account is the caller's account, which persisted queries are registered for.
	Account(ctx context.Context) string
	// RequestID names the request in answers and logs.
	RequestID(ctx context.Context) string
	// ETAMinutes is the trip's minutes until pickup as REST tells them, or nil.
	ETAMinutes(t *store.Trip) *int
	// DriverLocation is where the trip's driver is, when the caller may see it; else nil.
	DriverLocation(ctx context.Context, t *store.Trip) *store.DriverPosition
	// FollowTrip sends the trip's live state as the caller may see it: at once, then at every
	// change, until the trip is final (then it closes the channel) or ctx ends.
	FollowTrip(ctx context.Context, t store.Trip) <-chan LiveTrip
}

// LiveTrip is a trip's live state, as Subscription.tripUpdated sends it.
type LiveTrip struct {
	TripID         string
	Status         string
	ETAMinutes     *int
	DriverLocation *store.DriverPosition
	UpdatedAt      time.Time
}

// Config wires a Handler.
type Config struct {
	Host   Host
	Logger *slog.Logger
	Now    func() time.Time
	// InitTimeout is how long a socket may stay open without connection_init; zero means
	// wsInitTimeout.
	InitTimeout time.Duration
	// WithoutPlans runs every document through graphql-go, plain ones included (plan.go): the
	// reference the plans are compared with.
	WithoutPlans bool
}

// Handler runs GraphQL requests.
type Handler struct {
	host              Host
	log               *slog.Logger
	schema            *graphql.Schema
	root              *graphQLQuery // the resolver of Query, which plans start from
	schemaDescription *string
	persisted         *persistedQueries
	documents         documentCache
	initTimeout       time.Duration
}

// New parses the schema and binds the resolvers; a field without one fails here.
func New(cfg Config) (*Handler, error) {
	h := &Handler{
		host:              cfg.Host,
		log:               cfg.Logger,
		schemaDescription: schemaDescription(schema.SDL),
		persisted:         newPersistedQueries(cfg.Now),
		initTimeout:       cfg.InitTimeout,
	}
	if h.initTimeout <= 0 {
		h.initTimeout = wsInitTimeout
	}
	root := &graphQLQuery{h: h}
	sch, err := graphql.ParseSchema(schema.SDL, root,
		graphql.UseStringDescriptions(),
		graphql.MaxParallelism(graphQLMaxParallelism),
		// analyzeDocument enforces the limits first; these are graphql-go's own backstops.
		graphql.MaxDepth(graphQLMaxIntrospectionDepth),
		graphql.MaxQueryLength(4*graphQLMaxLength),
		// Its check that fields of one response name can be merged compares them in pairs,
		// and every fragment with everything beside it: bounded here, or a document of a few
		// hundred fragments costs a second and hundreds of megabytes.
		graphql.OverlapValidationLimit(graphQLMaxOverlapPairs),
		graphql.Logger(gqllog.LoggerFunc(func(ctx context.Context, value any) {
			h.log.ErrorContext(ctx, "graphql resolver panicked",
				slog.String("request_id", h.host.RequestID(ctx)), slog.String("panic", fmt.Sprint(value)))
		})),
		graphql.PanicHandler(graphQLPanics{h}),
		// No resolver asks which fields below it were selected (the batch knows them from
		// analyzeDocument): graphql-go need not record them for every field.
		graphql.DisableFieldSelections(),
	)
	if err != nil {
		return nil, fmt.Errorf("parse schema/ride.graphql: %w", err)
	}
	h.schema, h.root = sch, root
	if !cfg.WithoutPlans {
		h.documents.prepare = h.compile
	}
	return h, nil
}

// graphQLPanics answers a panicking resolver like any fault: INTERNAL, without the panic's text.
type graphQLPanics struct{ h *Handler }

// MakePanicError is the error a panicking resolver's field reports; the log has the panic.
func (p graphQLPanics) MakePanicError(ctx context.Context, _ any) *gqlerrors.QueryError {
	return &gqlerrors.QueryError{
		Message:    "Something went wrong on our side. Retry with backoff; quote the request_id if it persists.",
		Extensions: map[string]any{"code": gqlCodeInternal, "request_id": p.h.host.RequestID(ctx)},
	}
}

// graphQLRequest is a GraphQL request however it arrived.
type graphQLRequest struct {
	query         string
	operationName string
	variables     map[string]any
	persisted     *persistedQueryRef
}

// Get runs a query sent as URL parameters (GET /v1/graphql).
func (h *Handler) Get(ctx context.Context, p gen.QueryGraphQLParams) (Answer, error) {
	r := graphQLRequest{query: deref(p.Query), operationName: deref(p.OperationName)}
	if p.Variables != nil {
		if err := json.Unmarshal([]byte(*p.Variables), &r.variables); err != nil {
			return graphQLFailure(newRequestError(gqlCodeBadUserInput, "variables must be a JSON object (URL-encoded JSON text)."), 0)
		}
	}
	if p.Extensions != nil {
		var ext gen.GraphQLRequestExtensions
		if err := json.Unmarshal([]byte(*p.Extensions), &ext); err != nil {
			return graphQLFailure(newRequestError(gqlCodeBadRequest,
				`extensions must be a JSON object such as {"persistedQuery":{"version":1,"sha256Hash":"…"}}.`), 0)
		}
		r.persisted = persistedRef(&ext)
	}
	return h.run(ctx, r)
}

// Post runs a document sent as a JSON body (POST /v1/graphql).
func (h *Handler) Post(ctx context.Context, b *gen.GraphQLRequest) (Answer, error) {
	r := graphQLRequest{query: deref(b.Query), operationName: deref(b.OperationName), persisted: persistedRef(b.Extensions)}
	if b.Variables != nil {
		r.variables = *b.Variables
	}
	return h.run(ctx, r)
}

func persistedRef(ext *gen.GraphQLRequestExtensions) *persistedQueryRef {
	if ext == nil || ext.PersistedQuery == nil {
		return nil
	}
	return &persistedQueryRef{version: deref(ext.PersistedQuery.Version), hash: deref(ext.PersistedQuery.Sha256Hash)}
}

// run answers one request.
func (h *Handler) run(ctx context.Context, r graphQLRequest) (Answer, error) {
	query, register := r.query, false
	if r.persisted != nil {
		var reqErr *requestError
		query, register, reqErr = h.resolvePersistedQuery(ctx, r)
		if reqErr != nil {
			return graphQLFailure(reqErr, 0)
		}
	}
	if query == "" {
		return graphQLFailure(newRequestError(gqlCodeBadRequest,
			"Send the GraphQL document in query (or the hash of a registered one in extensions.persistedQuery)."), 0)
	}
	analysis, reqErr := h.documents.analyze(h.host.Account(ctx), query, r.operationName)
	if reqErr != nil {
		return graphQLFailure(reqErr, analysis.cost)
	}
	if analysis.operation.Operation == ast.Subscription {
		return graphQLFailure(newRequestError(gqlCodeBadRequest,
			"Subscriptions run over a WebSocket to /v1/graphql speaking graphql-transport-ws, not over HTTP requests.").
			at(analysis.operation.Position), analysis.cost)
	}

	ctx = withGraphQLBatch(ctx, newGraphQLBatch(h.host.Store(ctx), h.host.TripReach(ctx), analysis, r.variables))
	ctx, failed := withUnavailable(ctx)
	res, patch := h.execute(ctx, analysis, r)
	if failed.err != nil {
		return Answer{}, failed.err // 503 from the error boundary, as a REST read's
	}
	ran := graphQLRan(res)
	if ran && register {
		if err := h.persisted.register(ctx, h.host.Store(ctx), h.host.Account(ctx), hashQuery(query), query); err != nil {
			h.log.ErrorContext(ctx, "persisted query registration failed",
				slog.String("request_id", h.host.RequestID(ctx)), slog.String("error", err.Error()))
		}
	}
	env := graphQLEnvelope{
		Errors:     make([]graphQLError, 0, len(res.Errors)),
		Extensions: graphQLExtensions{Cost: graphQLCost{Requested: analysis.cost, Limit: graphQLMaxCost}},
	}
	for i, e := range res.Errors {
		if i == problem.MaxFields {
			env.Errors = append(env.Errors, moreErrors(len(res.Errors)-i, env.Errors[i-1]))
			break
		}
		env.Errors = append(env.Errors, h.errorFrom(e, ran, len(res.Data) > 0))
	}
	if !ran {
		return env.answer(http.StatusBadRequest)
	}
	env.Data = patch.apply(res.Data)
	return env.answer(http.StatusOK)
}

// execute runs the document: by its plan when it has one that can answer the request,
// otherwise through graphql-go.
func (h *Handler) execute(ctx context.Context, analysis documentAnalysis, r graphQLRequest) (*graphql.Response, *introspectionPatch) {
	if analysis.plan != nil {
		if data, errs, ok := analysis.plan.run(ctx, h.root, r.variables); ok {
			return &graphql.Response{Data: data, Errors: errs}, nil
		}
	}
	run, patch := rewriteIntrospection(analysis.doc, analysis.query, h.schemaDescription)
	return h.schema.Exec(ctx, run, r.operationName, r.variables), patch
}

// Planned tells whether a document's operation, sent by account, runs by a plan rather than
// through graphql-go.
func (h *Handler) Planned(account, query, operationName string) bool {
	a, reqErr := h.documents.analyze(account, query, operationName)
	return reqErr == nil && a.plan != nil
}

// compile gives a document that graphql-go finds valid its plan, when it is plain enough. A
// plan's variables are all ID! and take any string, so the document is validated with a string
// for each.
func (h *Handler) compile(a documentAnalysis) documentAnalysis {
	p := compilePlan(h.schema.AST(), reflect.TypeOf(h.root), a.operation)
	if p == nil {
		return a
	}
	variables := make(map[string]any, len(p.vars))
	for _, name := range p.vars {
		variables[name] = "id"
	}
	if len(h.schema.ValidateWithVariables(a.query, variables)) == 0 {
		a.plan = p
	}
	return a
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

// errorFrom gives an error of graphql-go its code. Resolver errors carry theirs. Of
// graphql-go's own, those before execution are syntax, validation or variable errors, those
// while binding arguments are variable errors, and those of a field (a null in a non-null
// field) are faults.
func (h *Handler) errorFrom(e *gqlerrors.QueryError, ran, executing bool) graphQLError {
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
	case e.Rule == "OverlapValidationLimitExceeded":
		code = gqlCodeTooComplex
		out.Message = fmt.Sprintf("The document's fields and fragments take more than %d comparisons to check that they merge; the limit is %d. Use fewer fragments or fewer fields of one name side by side.", graphQLMaxOverlapPairs, graphQLMaxOverlapPairs)
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

// moreErrors stands for the errors past the first problem.MaxFields of an answer, which
// lists no more: n of them, of last's kind.
func moreErrors(n int, last graphQLError) graphQLError {
	return graphQLError{Message: fmt.Sprintf("%d more errors are not listed; an answer lists the first %d.", n, problem.MaxFields),
		Extensions: map[string]any{"code": last.Extensions["code"]}}
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
func graphQLFailure(e *requestError, cost int) (Answer, error) {
	status := http.StatusBadRequest
	if e.code == gqlCodePersistedQueryNotFound {
		status = http.StatusOK
	}
	env := graphQLEnvelope{
		Errors:     []graphQLError{e.graphQLError()},
		Extensions: graphQLExtensions{Cost: graphQLCost{Requested: cost, Limit: graphQLMaxCost}},
	}
	return env.answer(status)
}

// graphQLError is e as an answer's error.
func (e *requestError) graphQLError() graphQLError {
	return graphQLError{Message: e.message, Locations: e.locations, Extensions: map[string]any{"code": e.code}}
}

// answer encodes the envelope. An answer without errors, the common one, is written out:
// json.Marshal would reflect over the envelope and copy data, which graphql-go wrote compact
// already, byte by byte to compact it again.
func (env graphQLEnvelope) answer(status int) (Answer, error) {
	if len(env.Errors) == 0 && len(env.Data) > 0 {
		body := make([]byte, 0, len(env.Data)+64)
		body = append(append(append(body, `{"data":`...), env.Data...), `,"extensions":{"cost":{"requested":`...)
		body = append(strconv.AppendInt(body, int64(env.Extensions.Cost.Requested), 10), `,"limit":`...)
		body = append(strconv.AppendInt(body, int64(env.Extensions.Cost.Limit), 10), "}}}"...)
		return Answer{Status: status, Body: body}, nil
	}
	body, err := json.Marshal(env)
	if err != nil {
		return Answer{}, fmt.Errorf("encode GraphQL answer: %w", err)
	}
	return Answer{Status: status, Body: body}, nil
}

// Answer is an encoded envelope and its status. The server writes it as the media type the
// client prefers (application/json or application/graphql-response+json; the body is the
// same); the generated typed responses would decode data into a map, which loses the field
// order the document asked for.
type Answer struct {
	Status int
	Body   []byte
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
