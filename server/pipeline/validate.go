package pipeline

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/labstack/echo/v4"

	"github.com/rideapi/ride/server/problem"
)

// validateRequest checks a request's parameters and body against its operation in
// openapi/ride.yaml. openapi3filter.ValidateRequest reads and decodes a body itself; a JSON
// body that checkInput has decoded already is instead validated as that value
// (validateJSONBody), which the handler then binds: one decode per request instead of three.
func (g *gate) validateRequest(ctx context.Context, req *http.Request, route *routers.Route, pathParams map[string]string, query url.Values, body *jsonBody) error {
	input := &openapi3filter.RequestValidationInput{
		Request:     req,
		PathParams:  pathParams,
		QueryParams: query,
		Route:       route,
		Options:     g.options,
	}
	media := decodedBodyMedia(req, route.Operation.RequestBody, body)
	if media == nil {
		return openapi3filter.ValidateRequest(ctx, input)
	}
	input.Options = g.parameterOptions
	err := openapi3filter.ValidateRequest(ctx, input)
	bodyErr := validateJSONBody(input, route.Operation.RequestBody.Value, media, body, g.options)
	if bodyErr == nil {
		return err
	}
	// As openapi3filter.ValidateRequest reports them with MultiError: parameters, then body.
	all, _ := err.(openapi3.MultiError)
	if err != nil && all == nil {
		all = openapi3.MultiError{err}
	}
	return append(all, bodyErr)
}

// decodedBodyMedia returns the media type of the operation's body that a decoded JSON body
// is validated against, or nil when openapi3filter must read the body: it is empty or not
// decoded, or the operation describes it in a way whose decoding openapi3filter decides
// (another media type, an encoding, binary content).
func decodedBodyMedia(req *http.Request, ref *openapi3.RequestBodyRef, body *jsonBody) *openapi3.MediaType {
	if body == nil || ref == nil || ref.Value == nil {
		return nil
	}
	contentType := req.Header.Get(echo.HeaderContentType)
	media := ref.Value.Content.Get(contentType)
	if media == nil || media.Schema == nil || media.Schema.Value == nil || media.Encoding[""] != nil {
		return nil
	}
	mediaType, _, _ := strings.Cut(contentType, ";")
	if strings.ToLower(strings.TrimSpace(mediaType)) != "application/json" {
		return nil
	}
	if s := media.Schema.Value; s.Type.Is(openapi3.TypeString) && s.Format == "binary" {
		return nil
	}
	return media
}

// validateJSONBody is openapi3filter.ValidateRequestBody for a body decoded already: the same
// schema options (those of opts), the same errors, defaults written into the value and the
// body, and, as with Options.KeepValidatedValue, the value left on the request's body for the
// handler to bind.
func validateJSONBody(input *openapi3filter.RequestValidationInput, requestBody *openapi3.RequestBody, media *openapi3.MediaType, body *jsonBody, opts *openapi3filter.Options) error {
	defaultsSet := false
	schemaOpts := []openapi3.SchemaValidationOption{openapi3.VisitAsRequest()}
	if !opts.SkipSettingDefaults {
		schemaOpts = append(schemaOpts, openapi3.DefaultsSet(func() { defaultsSet = true }))
	}
	if opts.MultiError {
		schemaOpts = append(schemaOpts, openapi3.MultiErrors())
	}
	if opts.ExcludeReadOnlyValidations {
		schemaOpts = append(schemaOpts, openapi3.DisableReadOnlyValidation())
	}
	if opts.RegexCompiler != nil {
		schemaOpts = append(schemaOpts, openapi3.SetSchemaRegexCompiler(opts.RegexCompiler))
	}
	schemaOpts = append(schemaOpts, opts.SchemaValidationOptions...)

	if err := media.Schema.Value.VisitJSON(body.value, schemaOpts...); err != nil {
		reason := "doesn't match schema"
		if id := schemaIdentifier(media.Schema); id != "" {
			reason += " " + id
		}
		return &openapi3filter.RequestError{Input: input, RequestBody: requestBody, Reason: reason, Err: err}
	}
	data := body.data
	if defaultsSet {
		var err error
		if data, err = openapi3filter.RegisteredBodyEncoder("application/json")(body.value); err != nil {
			return &openapi3filter.RequestError{Input: input, RequestBody: requestBody, Reason: "rewriting failed", Err: err}
		}
	}
	req := input.Request
	req.ContentLength = int64(len(data))
	req.Body = validatedBody{ReadCloser: io.NopCloser(bytes.NewReader(data)), value: body.value}
	return nil
}

// schemaIdentifier names a schema in errors as openapi3filter does: its $ref, else its title.
func schemaIdentifier(s *openapi3.SchemaRef) string {
	if id := strings.TrimSpace(s.Ref); id != "" {
		return id
	}
	return strings.TrimSpace(s.Value.Title)
}

// validatedBody is the body validateJSONBody leaves on a request, like openapi3filter's with
// Options.KeepValidatedValue: the generated handlers and the idempotency layer take the value
// through ValidatedValue instead of decoding the body again.
type validatedBody struct {
	io.ReadCloser
	value any
}

// ValidatedValue returns the decoded body, as validated.
func (b validatedBody) ValidatedValue() any { return b.value }

// defineFormats makes the validator check formats as the handlers read them: its own
// date-time pattern lets through what Go's RFC 3339 parser refuses (February 30, an offset of
// +25:00, a 60th second), which then failed in the handler's binding, in Go's words.
var defineFormats = sync.OnceFunc(func() {
	openapi3.DefineStringFormatValidator("date-time", openapi3.NewCallbackValidator(func(s string) error {
		_, err := time.Parse(time.RFC3339Nano, s)
		return err
	}))
})

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
