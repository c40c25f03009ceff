package pipeline

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/labstack/echo/v4"
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
