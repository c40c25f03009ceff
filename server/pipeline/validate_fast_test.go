package pipeline

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
)

// The gate skips the validator for a request its operation accepts whatever it carries
// (acceptsAnything). The validator itself must agree: for every such operation of
// openapi/ride.yaml, it accepts hostile path values and declared headers, with no query and no
// body.
func TestOperationsThatAcceptAnythingPassTheValidator(t *testing.T) {
	g, err := newGate(nil, map[string]bool{})
	if err != nil {
		t.Fatal(err)
	}
	values := []string{"x", "trp_" + strings.Repeat("a", 600), "ü✓ é", `"'<>{}`, "a,b;c=d", "a/b", "%zz", " spaced "}
	fast := map[string]bool{}
	for _, route := range g.routes {
		info := g.operations[route.Operation]
		if !info.acceptsAny {
			continue
		}
		fast[route.Method+" "+route.Path] = true
		for _, value := range values {
			params := map[string]string{}
			path := route.Path
			for _, segment := range strings.Split(route.Path, "/") {
				if name, ok := strings.CutPrefix(segment, "{"); ok {
					name = strings.TrimSuffix(name, "}")
					params[name] = value
					path = strings.Replace(path, segment, url.PathEscape(value), 1)
				}
			}
			req := httptest.NewRequest(route.Method, path, http.NoBody)
			for _, header := range info.headerParams {
				req.Header.Set(header, value)
			}
			input := &openapi3filter.RequestValidationInput{Request: req, PathParams: params,
				QueryParams: url.Values{}, Route: route, Options: g.options}
			if err := openapi3filter.ValidateRequest(context.Background(), input); err != nil {
				t.Errorf("%s %s with %q: the gate would skip the validator, which refuses it: %v", route.Method, route.Path, value, err)
			}
		}
	}
	for _, op := range []string{"GET /v1/trips/{tripId}", "GET /v1/drivers/{driverId}/trips"} {
		if !fast[op] {
			t.Errorf("%s: its parameters accept anything, yet the gate would validate them", op)
		}
	}
}

// A parameter with anything to check, or a body, sends every request to the validator.
func TestAParameterWithAConstraintKeepsTheValidator(t *testing.T) {
	str := func(edit func(s *openapi3.Schema)) *openapi3.SchemaRef {
		s := openapi3.NewStringSchema()
		if edit != nil {
			edit(s)
		}
		return s.NewRef()
	}
	param := func(in string, schema *openapi3.SchemaRef, edit func(p *openapi3.Parameter)) *openapi3.Operation {
		p := &openapi3.Parameter{Name: "x", In: in, Schema: schema, Required: in == openapi3.ParameterInPath}
		if edit != nil {
			edit(p)
		}
		return &openapi3.Operation{Parameters: openapi3.Parameters{{Value: p}}}
	}
	max := uint64(10)
	cases := map[string]*openapi3.Operation{
		"pattern":         param(openapi3.ParameterInPath, str(func(s *openapi3.Schema) { s.Pattern = "^trp_" }), nil),
		"minLength":       param(openapi3.ParameterInPath, str(func(s *openapi3.Schema) { s.MinLength = 3 }), nil),
		"maxLength":       param(openapi3.ParameterInPath, str(func(s *openapi3.Schema) { s.MaxLength = &max }), nil),
		"format":          param(openapi3.ParameterInPath, str(func(s *openapi3.Schema) { s.Format = "date-time" }), nil),
		"enum":            param(openapi3.ParameterInPath, str(func(s *openapi3.Schema) { s.Enum = []any{"a"} }), nil),
		"integer":         param(openapi3.ParameterInPath, openapi3.NewIntegerSchema().NewRef(), nil),
		"label style":     param(openapi3.ParameterInPath, str(nil), func(p *openapi3.Parameter) { p.Style = openapi3.SerializationLabel }),
		"header default":  param(openapi3.ParameterInHeader, str(func(s *openapi3.Schema) { s.Default = "a" }), nil),
		"required header": param(openapi3.ParameterInHeader, str(nil), func(p *openapi3.Parameter) { p.Required = true }),
		"required query":  param(openapi3.ParameterInQuery, str(nil), func(p *openapi3.Parameter) { p.Required = true }),
		"cookie":          param(openapi3.ParameterInCookie, str(nil), nil),
		"body":            {RequestBody: &openapi3.RequestBodyRef{Value: openapi3.NewRequestBody()}},
	}
	for name, op := range cases {
		if ok, _ := acceptsAnything(&openapi3.PathItem{}, op); ok {
			t.Errorf("%s: the gate would skip the validator", name)
		}
	}
	if ok, headers := acceptsAnything(&openapi3.PathItem{}, param(openapi3.ParameterInHeader, str(nil), func(p *openapi3.Parameter) { p.Name = "if-none-match" })); !ok || len(headers) != 1 || headers[0] != "If-None-Match" {
		t.Errorf("an optional header with nothing to check: got %v %v, want true [If-None-Match]", ok, headers)
	}
}

// An empty value of a declared header is the validator's to judge.
func TestAnEmptyDeclaredHeaderKeepsTheValidator(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "/v1/trips/trp_x", http.NoBody)
	if !declaredHeadersSent(req, []string{"If-None-Match"}) {
		t.Error("no header sent: nothing to check")
	}
	req.Header["If-None-Match"] = []string{""}
	if declaredHeadersSent(req, []string{"If-None-Match"}) {
		t.Error("an empty If-None-Match would skip the validator")
	}
}
