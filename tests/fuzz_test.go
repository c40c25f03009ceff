package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// The fuzz suite derives hostile requests from openapi/ride.yaml for every operation: junk in
// each path parameter, each query parameter and each body member, malformed and ambiguous
// JSON, wrong media types, too many and repeated parameters. Every answer must cost the process
// no more than a request's memory budget (whatever the host's speed, unlike a bound on time),
// never be a 5xx, match the document, and, when it refuses, be a problem+json whose code the
// problem catalogue (/docs/problems) lists. Cases are built in a fixed order, so a failure
// names a case that reproduces.

// fuzzCase is one hostile request.
type fuzzCase struct {
	name        string
	method      string
	path        string // already escaped: sent as written
	query       string // raw query string, sent as written
	contentType string
	body        []byte
}

// junkText is what goes into text inputs: control characters, invalid UTF-8, lengths past any
// limit, percent junk, markup and values of the wrong kind.
var junkText = []string{
	"\x00", "a\x00b", "\xff\xfe", "\xc0\xaf", "\xed\xa0\x80", strings.Repeat("a", 300),
	strings.Repeat("é", 5000), "%00", "%zz", "%", "../../etc/passwd", "<script>alert(1)</script>",
	"' OR 1=1 --", "\u202e", "\ufeff", " ", "", "-1", "1e309", "NaN", "null", "[]", "{}",
}

// junkPathSegments go into path parameters, escaped the ways a client or an attacker might.
var junkPathSegments = []string{
	"%00", "a%00b", "%ff%fe", "%c0%af", strings.Repeat("a", 300), strings.Repeat("%41", 400),
	"%25", "%2525", "%2F", "..%2F..", "%2e%2e", "a%20b", "%E2%80%AE", "%EF%BB%BF", "-1", "0",
	"null", "trp_", "%0d%0aX-Injected:%201",
}

// junkJSON replaces a body member's value.
var junkJSON = []string{
	`null`, `true`, `0`, `-1`, `1e309`, `-0`, `1.5`, `9007199254740993`, `""`, `"\u0000"`,
	`"` + strings.Repeat("x", 10_000) + `"`, `[]`, `{}`, `[[[[[[[[[[]]]]]]]]]]`, `{"a":{"b":{"c":1}}}`,
	`"2026-02-30T25:61:00Z"`, `"not a url"`, `"javascript:alert(1)"`, `"http://127.0.0.1:1/x"`,
}

// junkBodies replace a whole JSON body.
var junkBodies = []string{
	``, ` `, `{`, `}`, `[`, `null`, `[]`, `{}`, `"x"`, `1`, `{"a":1}}`, `{"a":1} {"b":2}`,
	`{"a":1}]]]`, `{"a":1,"a":2}`, `{"a":1,}`, `{'a':1}`, `{"a":1/*c*/}`, "{\"a\":\"\xff\"}",
	"\xef\xbb\xbf{}", strings.Repeat("[", 10_000) + strings.Repeat("]", 10_000),
	`{"a":` + strings.Repeat(`{"a":`, 500) + `1` + strings.Repeat(`}`, 501),
}

// wrongContentTypes are media types no operation accepts, or JSON said wrongly.
var wrongContentTypes = []string{
	"text/plain", "application/xml", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
	"application/json; charset=latin1", "application/jsonx", "application", ";;;", "",
}

// fuzzCases derives the hostile requests of every operation of the document.
func fuzzCases(doc *openapi3.T) []fuzzCase {
	var cases []fuzzCase
	paths := doc.Paths.InMatchingOrder()
	sort.Strings(paths)
	for _, template := range paths {
		item := doc.Paths.Value(template)
		methods := make([]string, 0, len(item.Operations()))
		for method := range item.Operations() {
			methods = append(methods, method)
		}
		sort.Strings(methods)
		for _, method := range methods {
			cases = append(cases, operationCases(template, item, method, item.GetOperation(method))...)
		}
	}
	return cases
}

var pathParam = regexp.MustCompile(`\{([^}]+)\}`)

func operationCases(template string, item *openapi3.PathItem, method string, op *openapi3.Operation) []fuzzCase {
	name := op.OperationID
	fill := func(junkFor string, junk string) string {
		return pathParam.ReplaceAllStringFunc(template, func(m string) string {
			if m[1:len(m)-1] == junkFor {
				return junk
			}
			return "x_fuzz0000000000000000000000"
		})
	}
	var body []byte
	contentType := ""
	if schema := jsonBodySchema(op); schema != nil {
		body = mustJSON(sampleOf(schema, 0))
		contentType = "application/json"
	}
	base := fuzzCase{method: method, path: fill("", ""), contentType: contentType, body: body}
	with := func(caseName string, change func(c *fuzzCase)) fuzzCase {
		c := base
		c.name = name + " " + caseName
		change(&c)
		return c
	}

	cases := []fuzzCase{with("as documented", func(*fuzzCase) {})}
	for _, m := range pathParam.FindAllStringSubmatch(template, -1) {
		for i, junk := range junkPathSegments {
			cases = append(cases, with(fmt.Sprintf("path.%s junk #%d", m[1], i), func(c *fuzzCase) { c.path = fill(m[1], junk) }))
		}
	}

	var query []*openapi3.Parameter
	for _, params := range []openapi3.Parameters{item.Parameters, op.Parameters} {
		for _, p := range params {
			if p.Value != nil && p.Value.In == openapi3.ParameterInQuery {
				query = append(query, p.Value)
			}
		}
	}
	for _, p := range query {
		for i, junk := range junkText {
			raw := url.QueryEscape(junk)
			if strings.HasPrefix(junk, "%") {
				raw = junk // percent junk goes on the wire as it is
			}
			cases = append(cases, with(fmt.Sprintf("query.%s junk #%d", p.Name, i), func(c *fuzzCase) { c.query = p.Name + "=" + raw }))
		}
		cases = append(cases, with("query."+p.Name+" repeated", func(c *fuzzCase) { c.query = p.Name + "=1&" + p.Name + "=2" }))
	}
	var many strings.Builder
	many.WriteString("a=1")
	for i := range 10_001 {
		fmt.Fprintf(&many, "&p%d=1", i)
	}
	cases = append(cases,
		with("too many query parameters", func(c *fuzzCase) { c.query = many.String() }),
		with("unknown query parameter", func(c *fuzzCase) { c.query = "fuzz=1" }),
		with("query separated by semicolons", func(c *fuzzCase) { c.query = "a=1;b=2" }),
	)

	if body == nil {
		// A body where none is expected is ignored or refused, never trusted.
		cases = append(cases, with("unexpected body", func(c *fuzzCase) {
			c.contentType, c.body = "application/json", []byte(`{"a":"\u0000"}`)
		}))
		return cases
	}
	for i, junk := range junkBodies {
		cases = append(cases, with(fmt.Sprintf("body junk #%d", i), func(c *fuzzCase) { c.body = []byte(junk) }))
	}
	cases = append(cases, with("body with trailing bytes", func(c *fuzzCase) { c.body = append(bytes.Clone(body), " {}"...) }))
	for i, ct := range wrongContentTypes {
		cases = append(cases, with(fmt.Sprintf("content type #%d", i), func(c *fuzzCase) { c.contentType = ct }))
	}
	for _, member := range bodyMembers(body) {
		for i, junk := range junkJSON {
			cases = append(cases, with(fmt.Sprintf("body.%s junk #%d", strings.Join(member, "."), i), func(c *fuzzCase) {
				c.body = replaceMember(body, member, json.RawMessage(junk))
			}))
		}
		cases = append(cases,
			with("body."+strings.Join(member, ".")+" missing", func(c *fuzzCase) { c.body = replaceMember(body, member, nil) }),
			with("body."+strings.Join(member, ".")+" twice", func(c *fuzzCase) { c.body = duplicateMember(body, member) }),
		)
	}
	return cases
}

func jsonBodySchema(op *openapi3.Operation) *openapi3.Schema {
	if op.RequestBody == nil || op.RequestBody.Value == nil {
		return nil
	}
	media := op.RequestBody.Value.Content.Get("application/json")
	if media == nil || media.Schema == nil {
		return nil
	}
	return media.Schema.Value
}

// sampleOf builds a value the schema accepts, from its examples where it has them.
func sampleOf(s *openapi3.Schema, depth int) any {
	switch {
	case s == nil || depth > 6:
		return nil
	case s.Example != nil:
		return s.Example
	case len(s.Enum) > 0:
		return s.Enum[0]
	case len(s.AllOf) > 0:
		merged := map[string]any{}
		for _, part := range s.AllOf {
			if m, ok := sampleOf(part.Value, depth+1).(map[string]any); ok {
				for k, v := range m {
					merged[k] = v
				}
			}
		}
		return merged
	case len(s.OneOf) > 0:
		return sampleOf(s.OneOf[0].Value, depth+1)
	case len(s.AnyOf) > 0:
		return sampleOf(s.AnyOf[0].Value, depth+1)
	}
	switch {
	case s.Type.Is(openapi3.TypeObject) || len(s.Properties) > 0:
		out := map[string]any{}
		for name, prop := range s.Properties {
			if prop.Value != nil && !prop.Value.ReadOnly {
				out[name] = sampleOf(prop.Value, depth+1)
			}
		}
		return out
	case s.Type.Is(openapi3.TypeArray):
		if s.Items == nil {
			return []any{}
		}
		return []any{sampleOf(s.Items.Value, depth+1)}
	case s.Type.Is(openapi3.TypeInteger), s.Type.Is(openapi3.TypeNumber):
		if s.Min != nil {
			return *s.Min
		}
		return 1
	case s.Type.Is(openapi3.TypeBoolean):
		return true
	case s.Format == "date-time":
		return time.Now().UTC().Add(time.Hour).Format(time.RFC3339)
	case s.Format == "uri":
		return "https://partner.example.com/hooks"
	}
	return strings.Repeat("a", max(int(s.MinLength), 1))
}

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}

// bodyMembers lists the paths of every member of a JSON object body, nested ones included.
func bodyMembers(body []byte) [][]string {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return nil
	}
	var out [][]string
	var walk func(prefix []string, v any)
	walk = func(prefix []string, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		names := make([]string, 0, len(m))
		for name := range m {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			path := append(append([]string(nil), prefix...), name)
			out = append(out, path)
			walk(path, m[name])
		}
	}
	walk(nil, v)
	return out
}

// replaceMember sets the member at path to value, or removes it when value is nil.
func replaceMember(body []byte, path []string, value json.RawMessage) []byte {
	var root map[string]any
	if err := json.Unmarshal(body, &root); err != nil {
		panic(err)
	}
	m := root
	for _, name := range path[:len(path)-1] {
		m = m[name].(map[string]any)
	}
	last := path[len(path)-1]
	if value == nil {
		delete(m, last)
	} else {
		m[last] = value
	}
	return mustJSON(root)
}

// duplicateMember writes the member at path twice, the second time with a junk value.
func duplicateMember(body []byte, path []string) []byte {
	marker := `"__fuzz_twice__"`
	data := replaceMember(body, path, json.RawMessage(marker))
	quoted := mustJSON(path[len(path)-1])
	return bytes.Replace(data, []byte(marker), []byte(marker+","+string(quoted)+":1"), 1)
}

var _ = ForEachEngine("Fuzzing every operation from the document", func(h *Harness) {
	It("answers every hostile request within a request's budget, with a documented status and a catalogued problem", func() {
		cases := fuzzCases(validator.doc)
		AddReportEntry("fuzz cases", len(cases))

		res, err := http.Get(h.URL + "/docs/problems")
		Expect(err).NotTo(HaveOccurred())
		page, err := io.ReadAll(res.Body)
		res.Body.Close()
		Expect(err).NotTo(HaveOccurred())

		// The timeout tells a hang from an answer, however slow the host: no hostile request
		// may hold its client for good.
		client := &http.Client{Timeout: time.Minute}
		var costliest uint64
		var failures []string
		for i, c := range cases {
			if err := InterceptGomegaFailure(func() {
				costliest = max(costliest, sendFuzzCase(h, client, string(page), i, c))
			}); err != nil {
				failures = append(failures, shorten(err.Error()))
			}
		}
		AddReportEntry("most bytes allocated by one exchange", costliest)
		Expect(failures).To(BeEmpty(), "%d of %d cases failed", len(failures), len(cases))
	})
})

// sendFuzzCase sends case c and checks its answer; it returns the bytes the process allocated
// during the exchange, the client's side included.
func sendFuzzCase(h *Harness, client *http.Client, page string, i int, c fuzzCase) uint64 {
	req, err := http.NewRequest(c.method, h.URL, bytes.NewReader(c.body))
	Expect(err).NotTo(HaveOccurred())
	req.URL.Opaque = c.path // sent exactly as built, percent junk included
	req.URL.RawQuery = c.query
	if c.contentType != "" || c.body != nil {
		req.Header.Set("Content-Type", c.contentType)
	}
	if c.body == nil {
		req.Body, req.ContentLength = nil, 0
	}
	req.Header.Set("Authorization", "Bearer "+h.Admin)
	req.Header.Set("Idempotency-Key", fmt.Sprintf("fuzz-%s-%d-%d", h.Engine, GinkgoRandomSeed(), i))

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res, err := client.Do(req)
	Expect(err).NotTo(HaveOccurred(), c.name)
	data, err := io.ReadAll(res.Body)
	res.Body.Close()
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	Expect(err).NotTo(HaveOccurred(), c.name)

	Expect(allocated).To(BeNumerically("<", requestMemoryBudget), "%s allocated %d bytes", c.name, allocated)
	Expect(res.StatusCode).To(BeNumerically("<", 500), "%s: %d %s", c.name, res.StatusCode, data)
	answer := &Response{Status: res.StatusCode, Header: res.Header, Body: data}
	check := req.Clone(req.Context())
	check.URL, _ = url.Parse(h.URL + c.path + "?" + c.query)
	if check.URL != nil {
		Expect(validateResponse(check, answer)).To(Succeed(), "%s: %d %s", c.name, res.StatusCode, data)
	}
	switch {
	case res.StatusCode < 400:
	case strings.HasPrefix(c.path, "/v1/graphql") && res.Header.Get("Content-Type") != "application/problem+json":
		// GraphQL refuses a document in its own format: errors[] with a code each.
		var answer struct {
			Errors []struct {
				Extensions struct{ Code string } `json:"extensions"`
			} `json:"errors"`
		}
		Expect(json.Unmarshal(data, &answer)).To(Succeed(), "%s: %s", c.name, data)
		Expect(answer.Errors).NotTo(BeEmpty(), "%s: %s", c.name, data)
		Expect(answer.Errors[0].Extensions.Code).NotTo(BeEmpty(), "%s: %s", c.name, data)
	default:
		Expect(res.Header.Get("Content-Type")).To(Equal("application/problem+json"), "%s: %s", c.name, data)
		code := answer.Problem().Code
		Expect(page).To(ContainSubstring(`<tr id="`+code+`">`), "%s: code %q is not in the catalogue", c.name, code)
	}
	Expect(leaks(data)).To(Succeed(), c.name)
	return allocated
}

// shorten keeps a failure readable when an answer body is large.
func shorten(s string) string {
	if len(s) > 600 {
		return s[:600] + "…"
	}
	return s
}
