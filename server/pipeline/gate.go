package pipeline

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/labstack/echo/v4"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/problem"
	"github.com/rideapi/ride/store"
)

// operationInfo is what the gate precomputes per operation, so a request pays for a map
// lookup instead of walking the document.
type operationInfo struct {
	id          string
	path        string     // the OpenAPI path template, e.g. /v1/trips/{tripId}
	class       limitClass // the rate-limit budget it draws on
	needsAuth   bool
	queryParams map[string]queryParam
	produces    []string // media types of the success responses, for Accept negotiation
	// acceptsAny is set when the validator has nothing to check in a request without a query
	// or a body (acceptsAnything), but that the headers in headerParams, where sent, are not
	// empty.
	acceptsAny   bool
	headerParams []string
	// cacheControl is the Cache-Control header value of its 200 answers, made once.
	cacheControl []string
}

// gate checks every request against openapi/ride.yaml before a handler runs: the route
// exists, the caller is authenticated where the document asks for it, no unknown query
// parameter is present, the Accept header admits the answer, and every parameter and body
// member matches its schema.
type gate struct {
	doc        *openapi3.T
	operations map[*openapi3.Operation]*operationInfo
	// routes are the document's routes by method and Echo path (/v1/trips/:tripId): Echo has
	// matched the request, the one routing decision a request gets, and the gate looks up
	// what it matched.
	routes map[echoRoute]*routers.Route
	// allowed lists the methods of each Echo path, for the Allow header of a 405.
	allowed map[string][]string
	// sockets are the OpenAPI paths whose GET upgrades carry their key in their own protocol
	// (Config.Sockets).
	sockets map[string]bool
	auth    *auth.Authenticator
	// outsideDocument are the routes served beside the document, let through unchecked.
	outsideDocument map[string]bool
	options         *openapi3filter.Options
	// parameterOptions are options without the body, for requests whose body the gate
	// validates as decoded already (validateJSONBody).
	parameterOptions *openapi3filter.Options
	// limits meters authenticated requests right after authentication; nil when rate
	// limits are off.
	limits limiter
	// skipValidation leaves out the parameter and body checks (route, authentication and
	// the unknown-parameter check stay). Only the middleware benchmarks set it, to measure
	// what validation costs.
	skipValidation bool
	// databaseTimeout bounds a request's wait for the database in all: a connection of the
	// pool, connecting, the answers of its statements, authentication's lookups included.
	databaseTimeout time.Duration
	// standbys tells whether the store reads from standbys, which must know for whom a
	// request reads (store.ReadingAs).
	standbys bool
}

// limiter spends the caller's request budget for an operation. It may write headers and
// returns the context later layers see, or the error to answer with (a 429).
type limiter interface {
	admit(ctx context.Context, req *http.Request, header http.Header, p auth.Principal, info *operationInfo) (context.Context, error)
}

func newGate(authenticator *auth.Authenticator, outsideDocument map[string]bool) (*gate, error) {
	defineFormats()
	doc, err := gen.GetSwagger()
	if err != nil {
		return nil, fmt.Errorf("load embedded OpenAPI document: %w", err)
	}
	g := &gate{
		doc:             doc,
		operations:      map[*openapi3.Operation]*operationInfo{},
		auth:            authenticator,
		outsideDocument: outsideDocument,
		options: &openapi3filter.Options{
			MultiError:         true,
			KeepValidatedValue: true,
			// Authentication ran before validation (401 beats 400); the filter need not repeat it.
			AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
		},
	}
	parameters := *g.options
	parameters.ExcludeRequestBody = true
	g.parameterOptions = &parameters
	g.routes = map[echoRoute]*routers.Route{}
	g.allowed = map[string][]string{}
	g.sockets = map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			info := describeOperation(doc, path, item, op)
			info.class = classify(method, path)
			g.operations[op] = info
			// The gate authenticated the caller already; the validator gets the operation
			// without security requirements, or it would read the whole body into memory
			// for an authentication function that does nothing.
			unsecured := *op
			unsecured.Security = &openapi3.SecurityRequirements{}
			g.operations[&unsecured] = info
			g.routes[echoRoute{method: method, path: echoPath(path)}] = &routers.Route{
				Spec: doc, Path: path, PathItem: item, Method: method, Operation: &unsecured,
			}
		}
		for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			if item.GetOperation(method) != nil {
				g.allowed[echoPath(path)] = append(g.allowed[echoPath(path)], method)
				if method == http.MethodGet {
					g.allowed[echoPath(path)] = append(g.allowed[echoPath(path)], http.MethodHead)
				}
			}
		}
	}
	return g, nil
}

// echoRoute names a route as Echo matched it.
type echoRoute struct{ method, path string }

// echoPath spells an OpenAPI path template the way oapi-codegen registers it with Echo:
// /v1/trips/{tripId} is /v1/trips/:tripId.
func echoPath(template string) string {
	return strings.NewReplacer("{", ":", "}", "").Replace(template)
}

// findRoute returns the document's route of the request and its path parameters, from what
// Echo matched: a path Echo knows with another method is 405 (with Allow), a path it does not
// know, or a parameter left empty, 404.
func (g *gate) findRoute(c echo.Context) (*routers.Route, map[string]string, error) {
	req := c.Request()
	route, ok := g.routes[echoRoute{method: req.Method, path: c.Path()}]
	if !ok {
		if allowed := g.allowed[c.Path()]; len(allowed) > 0 {
			p := problem.New(problem.MethodNotAllowed, req.Method+" is not supported on this path.")
			p.Header = http.Header{"Allow": {strings.Join(allowed, ", ")}}
			return nil, nil, p
		}
		return nil, nil, problem.New(problem.NotFound, "No route "+problem.Clip(req.URL.Path, maxMemberName)+".")
	}
	names, values := c.ParamNames(), c.ParamValues()
	params := make(map[string]string, len(names))
	for i, name := range names {
		value := ""
		if i < len(values) {
			value = values[i]
		}
		if unescaped, err := url.PathUnescape(value); err == nil {
			value = unescaped // Echo matches on the escaped path and hands the segment as sent
		}
		if value == "" {
			return nil, nil, problem.New(problem.NotFound, "No route "+problem.Clip(req.URL.Path, maxMemberName)+".")
		}
		params[name] = value
	}
	return route, params, nil
}

func describeOperation(doc *openapi3.T, path string, item *openapi3.PathItem, op *openapi3.Operation) *operationInfo {
	info := &operationInfo{id: op.OperationID, path: path, queryParams: map[string]queryParam{}}
	security := doc.Security
	if op.Security != nil {
		security = *op.Security
	}
	info.needsAuth = len(security) > 0
	for _, params := range []openapi3.Parameters{item.Parameters, op.Parameters} {
		for _, p := range params {
			if p.Value != nil && p.Value.In == openapi3.ParameterInQuery {
				info.queryParams[p.Value.Name] = describeQueryParam(p.Value)
			}
		}
	}
	seen := map[string]bool{}
	for code, resp := range op.Responses.Map() {
		if !strings.HasPrefix(code, "2") || resp.Value == nil {
			continue
		}
		for mediaType := range resp.Value.Content {
			if !seen[mediaType] {
				seen[mediaType] = true
				info.produces = append(info.produces, mediaType)
			}
		}
	}
	sort.Strings(info.produces)
	info.cacheControl = []string{cachePolicy(path)}
	info.acceptsAny, info.headerParams = acceptsAnything(item, op)
	return info
}

// operationFrom tells later layers (caching, logging, rate limits) which operation runs.
func operationFrom(ctx context.Context) *operationInfo {
	if s := stateOf(ctx); s != nil {
		return s.operation
	}
	return nil
}

func (g *gate) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if g.outsideDocument[c.Path()] {
			return next(c) // /metrics and /docs: public, and not operations of the document
		}
		req := c.Request()
		route, pathParams, err := g.findRoute(c)
		if err != nil {
			return err
		}
		info := g.operations[route.Operation]
		ctx := req.Context()
		state := stateOf(ctx)
		if state == nil { // a request Respond did not begin: the gate's context carries one
			state = &requestState{}
			ctx = context.WithValue(ctx, requestStateKey{}, state)
			req = req.WithContext(ctx)
			c.SetRequest(req)
		}
		state.operation = info
		if IsUpgrade(req) && req.Method == http.MethodGet && g.sockets[info.path] {
			// The socket's key arrives in its first message: its handler authenticates it and
			// meters what it runs. What the gate can check of the upgrade, it checks here.
			if _, err := AuthorizationHeader(req); err != nil {
				return err
			}
			if err := checkUpgrade(req); err != nil {
				return err
			}
			return next(c)
		}

		var waited time.Duration // for the database, while authenticating
		if info.needsAuth {
			authorization, err := AuthorizationHeader(req)
			if err != nil {
				return err
			}
			started := time.Now()
			principal, err := g.auth.Authenticate(store.WithDeadline(ctx, started.Add(g.databaseTimeout)), authorization)
			waited = time.Since(started)
			if err != nil {
				return err
			}
			ctx = auth.WithPrincipal(ctx, principal)
			if g.standbys {
				// A read (the rate limit's class: safe methods and GraphQL, which has no
				// mutations) may be served by a standby that has replayed the caller's writes.
				ctx = store.ReadingAs(ctx, principal.KeyID, info.class == classRead)
			}
			state.caller, state.authenticated = principal, true
			if g.limits != nil {
				if ctx, err = g.limits.admit(ctx, req, c.Response().Header(), principal, info); err != nil {
					return err
				}
				// Respond settles the budget from the request's context, whatever answers it.
				c.SetRequest(req.WithContext(ctx))
			}
		}

		query, err := parseQuery(req.URL.RawQuery)
		if err != nil {
			return err
		}
		body, err := checkInput(req, pathParams, query, route.Operation.RequestBody != nil)
		if err != nil {
			return err
		}
		if query, err = rejectUnknownQuery(req.URL.RawQuery, query, info); err != nil {
			return err
		}
		state.query = query
		if !acceptable(req.Header.Values(echo.HeaderAccept), info.produces) {
			return problem.New(problem.NotAcceptable,
				"This operation answers "+strings.Join(info.produces, " or ")+".")
		}
		if len(info.produces) > 1 {
			// The handler picks among its media types (GraphQL); it gets the choice.
			ctx = withMediaType(ctx, preferredMediaType(req.Header.Values(echo.HeaderAccept), info.produces))
		}
		if !g.skipValidation && !(info.acceptsAny && len(query) == 0 && declaredHeadersSent(req, info.headerParams)) {
			if err := g.validateRequest(ctx, req, route, pathParams, query, body); err != nil {
				return validationProblem(err, req)
			}
		}
		// From here on the request's statements share what is left of its wait for the
		// database: a pool whose connections are all taken, a server that does not answer or
		// takes long to connect cost it this bound in all, then 503. Reading the body, the
		// client's time, is not counted. Streams detach from it (see tripStream). The bound
		// is a value the store reads, not a cancellable context (see store.WithDeadline).
		// The request is copied once, with all the gate learnt.
		bounded := store.WithDeadline(ctx, time.Now().Add(g.databaseTimeout-waited))
		c.SetRequest(req.WithContext(bounded))
		return next(queryContext{Context: c, query: query})
	}
}

// IsUpgrade tells whether r asks to upgrade to a WebSocket.
func IsUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// checkUpgrade refuses, as any other invalid request, a WebSocket upgrade that RFC 6455 does
// not allow, before a WebSocket library answers it in plain text.
func checkUpgrade(r *http.Request) error {
	invalid := func(header, message string) error {
		return &problem.Error{Code: problem.InvalidRequest, Detail: "This WebSocket upgrade is invalid: " + message + ".",
			Fields: []problem.FieldError{{Location: "header." + header, Message: message}}}
	}
	upgrade := false
	for _, v := range r.Header.Values("Connection") {
		for _, token := range strings.Split(v, ",") {
			upgrade = upgrade || strings.EqualFold(strings.TrimSpace(token), "upgrade")
		}
	}
	if !upgrade {
		return invalid("Connection", "must include upgrade")
	}
	if r.Header.Get("Sec-WebSocket-Version") != "13" {
		return invalid("Sec-WebSocket-Version", "must be 13")
	}
	if key, err := base64.StdEncoding.DecodeString(r.Header.Get("Sec-WebSocket-Key")); err != nil || len(key) != 16 {
		return invalid("Sec-WebSocket-Key", "must be 16 bytes in base64")
	}
	return nil
}
