package pipeline

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
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

// defineFormats makes the validator check formats as the handlers read them: its own
// date-time pattern lets through what Go's RFC 3339 parser refuses (February 30, an offset of
// +25:00, a 60th second), which then failed in the handler's binding, in Go's words.
var defineFormats = sync.OnceFunc(func() {
	openapi3.DefineStringFormatValidator("date-time", openapi3.NewCallbackValidator(func(s string) error {
		_, err := time.Parse(time.RFC3339Nano, s)
		return err
	}))
})

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

// acceptsAnything tells whether openapi3filter.ValidateRequest accepts every request of the
// operation that has no query string and no body, whatever its path parameters (never empty:
// findRoute answers 404 first) and its headers, provided that the declared headers it carries
// are not empty. It does when no body is declared, no query parameter is required, and every
// path and header parameter is a string with nothing to check (no pattern, length, format,
// enum or default) in the simple style. Such a request skips the validator, which would decode
// and check each parameter only to accept it: GET /v1/trips/{tripId} is one, and most reads by
// id. headers are the declared header parameters, canonical.
func acceptsAnything(item *openapi3.PathItem, op *openapi3.Operation) (ok bool, headers []string) {
	if op.RequestBody != nil {
		return false, nil
	}
	for _, params := range []openapi3.Parameters{item.Parameters, op.Parameters} {
		for _, ref := range params {
			p := ref.Value
			if p == nil {
				return false, nil
			}
			switch p.In {
			case openapi3.ParameterInQuery:
				if p.Required {
					return false, nil
				}
				continue // absent from a request without a query string
			case openapi3.ParameterInPath, openapi3.ParameterInHeader:
			default:
				return false, nil
			}
			if p.Content != nil || p.Schema == nil || !unconstrainedString(p.Schema.Value) ||
				(p.Style != "" && p.Style != openapi3.SerializationSimple) ||
				(p.In == openapi3.ParameterInHeader && p.Required) {
				return false, nil
			}
			if p.In == openapi3.ParameterInHeader {
				headers = append(headers, http.CanonicalHeaderKey(p.Name))
			}
		}
	}
	return true, headers
}

// unconstrainedString is a string schema that every string satisfies, and that sets no
// default.
func unconstrainedString(s *openapi3.Schema) bool {
	return s != nil && s.Type.Is(openapi3.TypeString) && s.Format == "" && s.Pattern == "" &&
		s.MinLength == 0 && s.MaxLength == nil && len(s.Enum) == 0 && s.Default == nil &&
		s.Not == nil && len(s.OneOf) == 0 && len(s.AnyOf) == 0 && len(s.AllOf) == 0
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
		state.query, state.queried = query, true
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

// declaredHeadersSent tells whether every header of names (canonical) that req carries has a
// value. An empty one goes to the validator, which judges it (as absent, in the version of
// openapi3filter used), rather than the gate assuming how.
func declaredHeadersSent(req *http.Request, names []string) bool {
	for _, name := range names {
		if values, sent := req.Header[name]; sent && (len(values) == 0 || values[0] == "") {
			return false
		}
	}
	return true
}

// queryParam is what the gate needs to know of a query parameter before the validator runs.
type queryParam struct {
	// repeatable is true for an exploded array (?status=a&status=b); any other parameter
	// given twice is ambiguous and refused.
	repeatable bool
	// list is true for a comma-separated array (form style, not exploded: ?sort=a,b). What
	// mainstream clients send for an array by default is accepted for it too, and joined
	// into that form: the name repeated (?sort=a&sort=b, openapi-fetch, axios with
	// `indexes: null`) or with brackets (?sort[]=a&sort[]=b, axios and qs).
	list bool
}

func describeQueryParam(p *openapi3.Parameter) queryParam {
	if p.Schema == nil || p.Schema.Value == nil || !p.Schema.Value.Type.Is(openapi3.TypeArray) {
		return queryParam{}
	}
	form := p.Style == "" || p.Style == openapi3.SerializationForm
	exploded := p.Explode == nil || *p.Explode
	return queryParam{repeatable: form && exploded, list: form && !exploded}
}

// rejectUnknownQuery refuses query parameters the operation does not define, and a
// parameter given more than once unless it is an array. A comma-separated array given in
// pieces (repeated, or as `name[]`) is rewritten into its one comma-separated value before
// the validator and the handler read the query; an exploded array may be given as `name[]`.
func rejectUnknownQuery(raw string, query url.Values, info *operationInfo) (url.Values, error) {
	if len(query) == 0 {
		return query, nil
	}
	names := make([]string, 0, len(query))
	for name := range query {
		names = append(names, name)
	}
	sort.Strings(names)
	var found findings
	rewrite := false
	for _, name := range names {
		values := query[name]
		base, bracketed := strings.CutSuffix(name, "[]")
		param, known := info.queryParams[base]
		switch {
		case !known || (bracketed && !param.list && !param.repeatable):
			found.add("query."+problem.Clip(name, maxMemberName), "unknown parameter")
		case len(values) > 1 && !param.repeatable && !param.list:
			found.add("query."+name, "given more than once; send one value (lists are comma-separated)")
		case bracketed || (param.list && len(values) > 1):
			rewrite = true
		}
	}
	if found.total > 0 {
		return nil, &problem.Error{Code: problem.InvalidRequest,
			Detail: found.detail("The query string does not fit this operation; see errors[]."), Fields: found.list}
	}
	if rewrite {
		// Pieces of one array may come under two spellings (sort=a&sort[]=b): their order is
		// the query string's, which the parsed values no longer hold.
		return joinArrayPieces(raw, info), nil
	}
	return query, nil
}

// joinArrayPieces rewrites a query (already known to parse) so that every array parameter
// has its own name, and a comma-separated one a single value whose items keep the order in
// which they were sent.
func joinArrayPieces(raw string, info *operationInfo) url.Values {
	var names []string
	values := map[string][]string{}
	for pair := range strings.SplitSeq(raw, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		name, _ := url.QueryUnescape(k)
		value, _ := url.QueryUnescape(v)
		name = strings.TrimSuffix(name, "[]")
		if _, seen := values[name]; !seen {
			names = append(names, name)
		}
		values[name] = append(values[name], value)
	}
	out := make(url.Values, len(names))
	for _, name := range names {
		if info.queryParams[name].list {
			out[name] = []string{strings.Join(values[name], ",")}
		} else {
			out[name] = values[name]
		}
	}
	return out
}

// validationProblem turns kin-openapi's findings into one 400 (or 413/415) problem that names
// every invalid input.
func validationProblem(err error, req *http.Request) error {
	var httpErr *echo.HTTPError
	if errors.As(err, &httpErr) {
		return httpErr // the body limit tripped while the validator read the body
	}
	var readErr *problem.Error
	if errors.As(err, &readErr) {
		return readErr // the body did not arrive whole while the validator read it
	}
	var found findings
	var unsupported, malformed bool
	found.request(err, &unsupported, &malformed)
	fields := found.list

	switch {
	case unsupported:
		return problem.New(problem.UnsupportedMediaType, "Send the body as application/json.")
	case malformed:
		return problem.New(problem.MalformedJSON, "The body is not valid JSON.")
	}
	code, detail := problem.InvalidRequest, "The request does not match the API description; see errors[]."
	if onlyAt(fields, "query.limit") {
		code, detail = problem.InvalidLimit, "limit must be an integer between 1 and 100."
	} else if onlyAt(fields, "query.cursor") {
		code, detail = problem.InvalidCursor, "The cursor is malformed."
	} else if onlyAt(fields, "header.Idempotency-Key") {
		code, detail = problem.IdempotencyKeyRequired, "Send an Idempotency-Key header of 1 to 255 printable characters (a UUID v4 is recommended)."
		if req.Header.Get(headerIdempotencyKey) != "" {
			code, detail = problem.InvalidIdempotencyKey, "The Idempotency-Key header must be 1 to 255 printable ASCII characters (a UUID v4 is recommended)."
		}
	}
	return &problem.Error{Status: http.StatusBadRequest, Code: code, Detail: found.detail(detail), Fields: fields}
}

func onlyAt(fields []problem.FieldError, location string) bool {
	for _, f := range fields {
		if f.Location != location {
			return false
		}
	}
	return len(fields) > 0
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
