// Package problem is the API's error vocabulary: the catalogue of every error code with its
// HTTP status, title and meaning, and Error, the error that already knows its answer.
//
// Handlers and the request pipeline return an *Error (or a domain error the server maps to
// one); the server's error boundary alone writes it as an RFC 9457 problem. /docs/problems
// lists the catalogue, and GraphQL spells the same codes in its own way. Adding a code is one
// line in codes.go.
package problem

import (
	"fmt"
	"sort"
	"strconv"
	"unicode/utf8"
)

// Kind is what the catalogue knows of a code.
type Kind struct {
	Code    string
	Status  int
	Title   string
	Meaning string
}

// catalogue holds every kind by code.
var catalogue = map[string]Kind{}

// define adds a code to the catalogue and returns it.
func define(code string, status int, title, meaning string) string {
	if _, taken := catalogue[code]; taken {
		panic("problem code " + code + " is in the catalogue twice")
	}
	catalogue[code] = Kind{Code: code, Status: status, Title: title, Meaning: meaning}
	return code
}

// Lookup returns the catalogue's entry for code.
func Lookup(code string) (Kind, bool) {
	k, ok := catalogue[code]
	return k, ok
}

// Catalogue lists every kind, by status and then code.
func Catalogue() []Kind {
	kinds := make([]Kind, 0, len(catalogue))
	for _, k := range catalogue {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool {
		if kinds[i].Status != kinds[j].Status {
			return kinds[i].Status < kinds[j].Status
		}
		return kinds[i].Code < kinds[j].Code
	})
	return kinds
}

// FieldError is one invalid input of a request: where it is (query.limit, body.origin.lat)
// and what is wrong with it, the members of errors[] in the answer.
type FieldError struct {
	Location string
	Message  string
}

// Error is an error that already knows its HTTP answer.
type Error struct {
	// Status overrides the catalogue's status of Code; zero (nearly always) keeps it.
	Status int
	Code   string
	Detail string
	// Fields lists each invalid input of a validation failure.
	Fields []FieldError
	// Header carries headers the answer needs, such as Allow or WWW-Authenticate (an
	// http.Header, which the catalogue need not know).
	Header map[string][]string
	// FailureCode is the provider's reason of a payment_declined answer.
	FailureCode string
	// Err is the cause, logged for 5xx and never rendered.
	Err error
}

// New is the problem of code, with the catalogue's status and title.
func New(code, detail string) *Error {
	return &Error{Code: code, Detail: detail}
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%d %s: %s: %v", e.HTTPStatus(), e.Code, e.Detail, e.Err)
	}
	return fmt.Sprintf("%d %s: %s", e.HTTPStatus(), e.Code, e.Detail)
}

func (e *Error) Unwrap() error { return e.Err }

// HTTPStatus is the status of the answer: the catalogue's for Code unless overridden.
func (e *Error) HTTPStatus() int {
	if e.Status != 0 {
		return e.Status
	}
	if k, ok := catalogue[e.Code]; ok {
		return k.Status
	}
	return catalogue[Internal].Status
}

// Title is the catalogue's title of the answer's code, or that of internal for a code it
// lacks.
func (e *Error) Title() string {
	if k, ok := catalogue[e.Code]; ok {
		return k.Title
	}
	return catalogue[Internal].Title
}

// Bounds of an answer: whatever a request sends, its problem stays small. A body of 1 MiB of
// unknown members is one finding each, and member names are as long as the client likes.
const (
	// MaxFields is the longest errors[] an answer lists; further findings are counted in
	// the detail.
	MaxFields = 50
	// maxFieldText bounds each location and message of errors[], in characters.
	maxFieldText = 200
	// maxDetail bounds the detail, in characters.
	maxDetail = 1000
)

// Bounded returns e with at most MaxFields findings, each location and message at most
// maxFieldText characters, and a detail of at most maxDetail; e itself when it is within
// them. The error boundary applies it to every answer.
func (e *Error) Bounded() *Error {
	within := len(e.Fields) <= MaxFields && utf8.RuneCountInString(e.Detail) <= maxDetail
	for _, f := range e.Fields {
		within = within && utf8.RuneCountInString(f.Location) <= maxFieldText && utf8.RuneCountInString(f.Message) <= maxFieldText
	}
	if within {
		return e
	}
	out := *e
	out.Detail = Clip(e.Detail, maxDetail)
	fields := e.Fields
	if len(fields) > MaxFields {
		fields = fields[:MaxFields]
		out.Detail += " errors[] lists the first " + strconv.Itoa(MaxFields) + " findings of " + strconv.Itoa(len(e.Fields)) + "."
	}
	out.Fields = make([]FieldError, len(fields))
	for i, f := range fields {
		out.Fields[i] = FieldError{Location: Clip(f.Location, maxFieldText), Message: Clip(f.Message, maxFieldText)}
	}
	return &out
}

// Clip keeps the first n characters of s, marking a cut with an ellipsis.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i, count := 0, 0
	for i = range s {
		if count == n {
			return s[:i] + "…"
		}
		count++
	}
	return s
}

// TruncateID keeps an id quoted in a detail to 64 characters, so that an over-long id from a
// request does not fill the answer.
func TruncateID(id string) string {
	if len(id) > 64 {
		return id[:64] + "…"
	}
	return id
}
