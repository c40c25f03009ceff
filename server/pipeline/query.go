package pipeline

import (
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/labstack/echo/v4"

	"github.com/rideapi/ride/server/problem"
)

// parseQuery reads the query string, the one time a request's query is parsed: the gate checks,
// validates and rewrites the values in place, and the handler binds the same ones (QueryOf, and
// the Echo context the gate hands on). An unreadable query string is 400, in the API's words.
func parseQuery(raw string) (url.Values, error) {
	if raw == "" {
		return nil, nil // read-only from here on: an empty query needs no map
	}
	query, err := url.ParseQuery(raw)
	if err != nil {
		return nil, &problem.Error{Code: problem.InvalidRequest,
			Detail: "The query string cannot be read: " + queryParseReason(err) + ".",
			Fields: []problem.FieldError{{Location: "query", Message: queryParseReason(err)}}}
	}
	return query, nil
}

// QueryOf is the request's query as the gate parsed, checked and rewrote it; parsed anew only
// for a request that did not pass the gate.
func QueryOf(req *http.Request) url.Values {
	if s := stateOf(req.Context()); s != nil && s.query != nil {
		return s.query
	}
	return req.URL.Query() // an empty query, or one the gate has not read
}

// queryContext hands the handler the query the gate parsed: Echo's own QueryParams would parse
// the query string again.
type queryContext struct {
	echo.Context
	query url.Values
}

func (c queryContext) QueryParams() url.Values       { return c.query }
func (c queryContext) QueryParam(name string) string { return c.query.Get(name) }

// queryParseReason words a url.ParseQuery failure without quoting the input.
func queryParseReason(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "exceeded limit"):
		return "too many parameters (at most 10,000)"
	case strings.Contains(msg, "semicolon"):
		return "a semicolon separates parameters (use &)"
	}
	return "a malformed percent-escape"
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
