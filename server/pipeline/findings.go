package pipeline

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/rideapi/ride/server/problem"
)

// The findings of a validation, in the API's words: every entry of errors[] names its input
// (query.limit, body.origin.lat, body.positions.0.lat) and says what the document asks of it.
// The validator's own wording (and Go's, which it quotes: strconv, encoding/json, regular
// expressions of formats) never reaches an answer. The list holds at most problem.MaxFields
// entries whatever the request holds, so a body of a million unknown members costs an answer
// of a few kilobytes.

// findings collects the entries of errors[], keeping the first problem.MaxFields and counting
// the others.
type findings struct {
	list  []problem.FieldError
	total int
}

func (f *findings) add(location, message string) {
	f.total++
	if len(f.list) < problem.MaxFields {
		f.list = append(f.list, problem.FieldError{Location: location, Message: message})
	}
}

// detail is the problem's detail: intro, and how many findings were left out.
func (f *findings) detail(intro string) string {
	if f.total > len(f.list) {
		return intro + " errors[] lists the first " + strconv.Itoa(len(f.list)) + " findings of " + strconv.Itoa(f.total) + "."
	}
	return intro
}

// maxMemberName bounds a member name quoted in a location, in characters.
const maxMemberName = 64

// parameterFindings adds the findings of a parameter. A finding about one item of an array
// parameter names the parameter and says the item's position in the message.
func (f *findings) parameter(location string, param *openapi3.Parameter, err error) {
	var schema *openapi3.Schema
	if param != nil && param.Schema != nil {
		schema = param.Schema.Value
	}
	switch {
	case errors.Is(err, openapi3filter.ErrInvalidRequired):
		f.add(location, "is required")
		return
	case errors.Is(err, openapi3filter.ErrInvalidEmptyValue):
		f.add(location, "must not be empty")
		return
	}
	var schemaErr *openapi3.SchemaError
	var multi openapi3.MultiError
	if !errors.As(err, &schemaErr) && !errors.As(err, &multi) {
		// The value did not even parse as its type (a ParseError quoting strconv).
		f.add(location, mustBe(schema))
		return
	}
	items := &findings{}
	items.schema(location, err)
	f.total += items.total - len(items.list)
	for _, item := range items.list {
		if rest, ok := strings.CutPrefix(item.Location, location+"."); ok {
			item = problem.FieldError{Location: location, Message: "item " + rest + ": " + item.Message}
		}
		f.add(item.Location, item.Message)
	}
}

// schema adds one finding per failing member of a schema error tree, at location and below.
func (f *findings) schema(location string, err error) {
	var multi openapi3.MultiError
	if errors.As(err, &multi) {
		for _, e := range multi {
			f.schema(location, e)
		}
		return
	}
	var schemaErr *openapi3.SchemaError
	if !errors.As(err, &schemaErr) {
		f.add(location, "is not valid here")
		return
	}
	for _, part := range schemaErr.JSONPointer() {
		location += "." + problem.Clip(part, maxMemberName)
	}
	if schemaErr.SchemaField == "properties" {
		// An unknown member; the validator names it only in its reason.
		if name, ok := unsupportedMember(schemaErr.Reason); ok {
			f.add(location+"."+problem.Clip(name, maxMemberName), "is not a member of this object")
			return
		}
	}
	f.add(location, schemaMessage(schemaErr))
}

// unsupportedMember reads the member name out of the validator's reason for an unknown member,
// `property "name" is unsupported`.
func unsupportedMember(reason string) (string, bool) {
	quoted, ok := strings.CutPrefix(reason, "property ")
	if !ok {
		return "", false
	}
	quoted, ok = strings.CutSuffix(quoted, " is unsupported")
	if !ok {
		return "", false
	}
	name, err := strconv.Unquote(quoted)
	return name, err == nil
}

// schemaMessage says what the schema keyword that failed asks of the value.
func schemaMessage(e *openapi3.SchemaError) string {
	s := e.Schema
	if s == nil {
		return "is not valid here"
	}
	switch e.SchemaField {
	case "type":
		if e.Origin != nil {
			return "is a number too large to be read"
		}
		return mustBe(s)
	case "nullable":
		return "must not be null"
	case "enum":
		values := make([]string, 0, len(s.Enum))
		for _, v := range s.Enum {
			values = append(values, fmt.Sprint(v))
		}
		return problem.Clip("must be one of: "+strings.Join(values, ", "), 160)
	case "format":
		return formatMessage(s)
	case "minimum":
		if deref(s.ExclusiveMin.Bool) {
			return "must be greater than " + number(s.Min)
		}
		return "must be at least " + number(s.Min)
	case "maximum":
		if deref(s.ExclusiveMax.Bool) {
			return "must be less than " + number(s.Max)
		}
		return "must be at most " + number(s.Max)
	case "exclusiveMinimum":
		return "must be greater than " + number(s.Min)
	case "exclusiveMaximum":
		return "must be less than " + number(s.Max)
	case "multipleOf":
		return "must be a multiple of " + number(s.MultipleOf)
	case "minLength":
		if s.MinLength == 1 {
			return "must not be empty"
		}
		return fmt.Sprintf("must be at least %d characters long", s.MinLength)
	case "maxLength":
		return fmt.Sprintf("must be at most %d characters long", deref(s.MaxLength))
	case "pattern":
		return problem.Clip("must match the pattern "+s.Pattern, 160)
	case "minItems":
		return fmt.Sprintf("must hold at least %d items", s.MinItems)
	case "maxItems":
		return fmt.Sprintf("must hold at most %d items", deref(s.MaxItems))
	case "uniqueItems":
		return "must not hold the same item twice"
	case "minProperties":
		return fmt.Sprintf("must have at least %d members", s.MinProps)
	case "maxProperties":
		return fmt.Sprintf("must have at most %d members", deref(s.MaxProps))
	case "required":
		return "is required"
	case "oneOf", "anyOf":
		return "does not match any of the forms allowed here"
	case "discriminator":
		return "does not name a known kind"
	}
	return "is not valid here"
}

// mustBe says which type a schema asks for.
func mustBe(s *openapi3.Schema) string {
	if s == nil || s.Type == nil {
		return "is not valid here"
	}
	var words []string
	for _, t := range s.Type.Slice() {
		switch t {
		case openapi3.TypeInteger:
			words = append(words, "an integer")
		case openapi3.TypeNumber:
			words = append(words, "a number")
		case openapi3.TypeString:
			words = append(words, "a string")
		case openapi3.TypeBoolean:
			words = append(words, "true or false")
		case openapi3.TypeObject:
			words = append(words, "an object")
		case openapi3.TypeArray:
			words = append(words, "an array")
		}
	}
	if len(words) == 0 {
		return "is not valid here"
	}
	if s.Nullable {
		words = append(words, "null")
	}
	return "must be " + strings.Join(words, " or ")
}

// formatMessage says what a schema's format asks for.
func formatMessage(s *openapi3.Schema) string {
	switch s.Format {
	case "date-time":
		return "must be an RFC 3339 date-time such as 2026-11-21T08:15:30Z"
	case "date":
		return "must be a date such as 2026-11-21"
	case "uri":
		return "must be an absolute URI"
	case "email":
		return "must be an email address"
	case "int32":
		return "must be an integer from -2147483648 to 2147483647"
	case "int64":
		return "must be an integer from -9223372036854775808 to 9223372036854775807"
	}
	return "must be in the " + problem.Clip(s.Format, 40) + " format"
}

func number(f *float64) string {
	if f == nil {
		return "the bound"
	}
	return strconv.FormatFloat(*f, 'f', -1, 64)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// requestFindings flattens the validator's result into findings: each RequestError names a
// parameter or the body.
func (f *findings) request(err error, unsupported, malformed *bool) {
	// A RequestError may wrap a MultiError of schema errors: take it before unwrapping
	// further, or the parameter it names is lost.
	reqErr, isReqErr := err.(*openapi3filter.RequestError)
	if !isReqErr {
		var multi openapi3.MultiError
		if errors.As(err, &multi) {
			for _, e := range multi {
				f.request(e, unsupported, malformed)
			}
			return
		}
		if !errors.As(err, &reqErr) {
			f.add("request", "is not valid here")
			return
		}
	}
	switch {
	case reqErr.Parameter != nil:
		f.parameter(reqErr.Parameter.In+"."+reqErr.Parameter.Name, reqErr.Parameter, reqErr.Err)
	case strings.HasPrefix(reqErr.Reason, "header Content-Type has unexpected value"):
		*unsupported = true
	case reqErr.Reason == "failed to decode request body":
		*malformed = true
	case errors.Is(reqErr.Err, openapi3filter.ErrInvalidRequired):
		f.add("body", "is required")
	case reqErr.Err == nil:
		f.add("body", "is not valid here")
	default:
		f.schema("body", reqErr.Err)
	}
}
