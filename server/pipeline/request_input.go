package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/rideapi/ride/server/problem"
)

// The checks here refuse input that the document's schemas cannot express but that no part of
// the service may ever see: text that is not UTF-8 or holds a NUL (PostgreSQL refuses both in
// text columns, and they break logs and headers), query strings that do not parse, and JSON
// that the standard decoder would read leniently (trailing bytes after the value, a member
// given twice with the last one winning). Each is a 400 that names the input at fault.

// checkInput refuses a request whose path parameters, query or JSON body hold input no
// operation accepts. A JSON body is read, put back, and returned decoded for the validator;
// only when hasBody, the operation takes one: a body sent to any other is never read.
func checkInput(req *http.Request, pathParams map[string]string, query url.Values, hasBody bool) (*jsonBody, error) {
	var fields []problem.FieldError
	names := make([]string, 0, len(pathParams))
	for name := range pathParams {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		value := pathParams[name]
		if unescaped, err := url.PathUnescape(value); err == nil {
			value = unescaped // the document's router may hand over a segment still escaped
		}
		if msg := badText(value); msg != "" {
			fields = append(fields, problem.FieldError{Location: "path." + name, Message: msg})
		}
	}
	{
		for name, values := range query {
			if msg := badText(name); msg != "" {
				fields = append(fields, problem.FieldError{Location: "query", Message: "a parameter name " + msg})
				continue
			}
			for _, v := range values {
				if msg := badText(v); msg != "" {
					fields = append(fields, problem.FieldError{Location: "query." + name, Message: msg})
					break
				}
			}
		}
	}
	if len(fields) > 0 {
		sort.SliceStable(fields, func(i, j int) bool { return fields[i].Location < fields[j].Location })
		return nil, &problem.Error{Code: problem.InvalidRequest,
			Detail: "Text must be UTF-8 without NUL characters; see errors[].", Fields: fields}
	}
	if hasBody && isJSON(req.Header.Get(echo.HeaderContentType)) && req.Body != nil && req.Body != http.NoBody {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err // 413 from limitedBody, or the client's body did not arrive whole
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		if len(body) > 0 {
			if value, ok := decodeJSON(body); ok {
				return &jsonBody{data: body, value: value}, nil
			}
			return nil, checkJSON(body) // says what decodeJSON refused
		}
	}
	return nil, nil
}

// jsonBody is a request's JSON body as read and as decoded.
type jsonBody struct {
	data  []byte
	value any
}

// badText says what is wrong with a text input, or "" when nothing is.
func badText(s string) string {
	switch {
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "contains a NUL character"
	}
	return ""
}

func isJSON(contentType string) bool {
	mediaType, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mediaType == "application/json" || strings.HasSuffix(mediaType, "+json"))
}

// maxJSONDepth bounds the nesting of a body: no operation takes more than a few levels.
const maxJSONDepth = 64

// maxJSONMembers and maxJSONItems bound an object's members and an array's items: no
// operation takes more than a hundred of either, and a body of a million tiny members or items
// that the validator would report one by one is refused before it is validated.
const (
	maxJSONMembers = 1000
	maxJSONItems   = 1000
)

// errJSONInvalid stands for every syntax error of a body; the answer says malformed_json.
var errJSONInvalid = errors.New("invalid JSON")

// checkJSON reads body as exactly one JSON value, refusing what encoding/json would let
// through: invalid UTF-8 (it would become U+FFFD), a member name given twice in one object (the
// last would win), a NUL in a string, and anything after the value.
//
// It checks the syntax with json.Valid, then walks the valid text once without decoding it
// (jsonWalk): every body of every write passes here, and encoding/json's token reader cost a
// third of the CPU of a small write.
func checkJSON(body []byte) error {
	if !utf8.Valid(body) {
		return &problem.Error{Code: problem.MalformedJSON, Detail: "The body is not valid UTF-8."}
	}
	if !json.Valid(body) {
		var first json.RawMessage
		if json.NewDecoder(bytes.NewReader(body)).Decode(&first) == nil {
			return problem.New(problem.MalformedJSON,
				"The body holds more than one JSON value: nothing may follow the first.")
		}
		return problem.New(problem.MalformedJSON, "The body is not valid JSON.")
	}
	w := jsonWalk{b: body}
	if err := w.value(0); err != nil {
		var p *problem.Error
		if errors.As(err, &p) {
			return p
		}
		return problem.New(problem.MalformedJSON, "The body is not valid JSON.")
	}
	return nil
}

// jsonWalk walks text that json.Valid accepted. path holds the members and indexes down to
// the current value; locations are spelled out only for an error.
type jsonWalk struct {
	b    []byte
	i    int
	path []string
}

func (w *jsonWalk) location(last string) string {
	var b strings.Builder
	b.WriteString("body")
	for _, p := range w.path {
		b.WriteByte('.')
		b.WriteString(p)
	}
	if last != "" {
		b.WriteByte('.')
		b.WriteString(last)
	}
	return b.String()
}

func (w *jsonWalk) space() { w.i = skipJSONSpace(w.b, w.i) }

// skipJSONSpace returns the index of the first byte at or after i in b that is not JSON white
// space (len(b) when none is).
func skipJSONSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// str reads the string at w.i and returns its text.
func (w *jsonWalk) str() string {
	start := w.i + 1
	escaped := false
	for w.i = start; w.b[w.i] != '"'; w.i++ {
		if w.b[w.i] == '\\' {
			escaped = true
			w.i++
		}
	}
	raw := w.b[start:w.i]
	w.i++
	if !escaped {
		return string(raw)
	}
	var text string
	_ = json.Unmarshal(w.b[start-1:w.i], &text) // valid JSON text: it decodes
	return text
}

func (w *jsonWalk) value(depth int) error {
	if depth > maxJSONDepth {
		return errJSONInvalid
	}
	w.space()
	switch w.b[w.i] {
	case '"':
		if strings.IndexByte(w.str(), 0) >= 0 {
			return jsonFieldError(problem.InvalidRequest, w.location(""), "contains a NUL character")
		}
	case '{':
		w.i++
		var seen []string // objects of the API have a few members: a slice beats a map
		for {
			w.space()
			if w.b[w.i] == '}' {
				w.i++
				return nil
			}
			if w.b[w.i] == ',' {
				w.i++
				w.space()
			}
			if len(seen) == maxJSONMembers {
				return tooLarge(w.location(""), fmt.Sprintf("holds more than %d members", maxJSONMembers))
			}
			name := w.str()
			if badText(name) != "" {
				return jsonFieldError(problem.InvalidRequest, w.location(""), "a member name contains a NUL character")
			}
			if slices.Contains(seen, name) {
				return jsonFieldError(problem.MalformedJSON, w.location(name), "given more than once")
			}
			seen = append(seen, name)
			w.space()
			w.i++ // the colon
			w.path = append(w.path, name)
			if err := w.value(depth + 1); err != nil {
				return err
			}
			w.path = w.path[:len(w.path)-1]
		}
	case '[':
		w.i++
		for n := 0; ; n++ {
			w.space()
			if w.b[w.i] == ']' {
				w.i++
				return nil
			}
			if w.b[w.i] == ',' {
				w.i++
			}
			if n == maxJSONItems {
				return tooLarge(w.location(""), fmt.Sprintf("holds more than %d items", maxJSONItems))
			}
			w.path = append(w.path, strconv.Itoa(n))
			if err := w.value(depth + 1); err != nil {
				return err
			}
			w.path = w.path[:len(w.path)-1]
		}
	default: // a number, true, false or null
		for w.i < len(w.b) && !strings.ContainsRune(",]} \t\n\r", rune(w.b[w.i])) {
			w.i++
		}
	}
	return nil
}

// tooLarge refuses an object or array past maxJSONMembers or maxJSONItems.
func tooLarge(location, message string) *problem.Error {
	return &problem.Error{Code: problem.InvalidRequest,
		Detail: "The body holds an object or an array larger than any operation takes; see errors[].",
		Fields: []problem.FieldError{{Location: location, Message: message}}}
}

func jsonFieldError(code, location, message string) *problem.Error {
	detail := "The body is not valid JSON: " + location + " is " + message + "."
	if code == problem.InvalidRequest {
		detail = "Text must be UTF-8 without NUL characters; see errors[]."
	}
	return &problem.Error{Status: http.StatusBadRequest, Code: code, Detail: detail,
		Fields: []problem.FieldError{{Location: location, Message: message}}}
}

// AuthorizationHeader is the request's one Authorization value. Sent twice, it is a 400: which
// of two keys speaks for a request must never depend on which one a proxy or a library reads.
func AuthorizationHeader(req *http.Request) (string, error) {
	values := req.Header.Values(echo.HeaderAuthorization)
	if len(values) > 1 {
		return "", &problem.Error{Code: problem.InvalidRequest,
			Detail: "Send one Authorization header, not " + strconv.Itoa(len(values)) + ".",
			Fields: []problem.FieldError{{Location: "header.Authorization", Message: "sent more than once"}}}
	}
	if len(values) == 0 {
		return "", nil
	}
	return values[0], nil
}
