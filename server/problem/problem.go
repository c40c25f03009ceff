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
	"net/http"
	"sort"

	"github.com/rideapi/ride/gen"
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

// Error is an error that already knows its HTTP answer.
type Error struct {
	// Status overrides the catalogue's status of Code; zero (nearly always) keeps it.
	Status int
	Code   string
	Detail string
	// Fields lists each invalid input of a validation failure.
	Fields []gen.ProblemFieldError
	// Header carries headers the answer needs, such as Allow or WWW-Authenticate.
	Header http.Header
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
	return http.StatusInternalServerError
}

// Title is the catalogue's title of the answer's code, or the status text for a code it lacks.
func (e *Error) Title() string {
	if k, ok := catalogue[e.Code]; ok {
		return k.Title
	}
	return http.StatusText(e.HTTPStatus())
}

// TruncateID keeps an id quoted in a detail to 64 characters, so that an over-long id from a
// request does not fill the answer.
func TruncateID(id string) string {
	if len(id) > 64 {
		return id[:64] + "…"
	}
	return id
}
