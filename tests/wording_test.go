package tests

import (
	"fmt"
	"strings"
)

// internalWords are pieces of Go's, the validator's, the router's and the drivers' own wording.
// None may reach an answer: a client reads the API's words, naming its inputs, and an answer
// must not tell what runs behind it.
var internalWords = []string{
	"json.Number", "float64", "int64", "int32", "strconv", "invalid syntax", "Unmarshal", "unmarshal",
	"offset=", "expected=", "got=", "code=", "message=", "cannot convert", "is unsupported",
	"doesn't match", "value must be", "value is not one of", "parsing time", "extra text",
	"error parsing", "Invalid format for parameter", "is required, but not found",
	"Expected one value", "runtime error", "goroutine", "nil pointer", "%!", "sql:", "pgx", "gorm",
	"SQLSTATE", "openapi3", "kin-openapi", "reflect", "interface {}", "map[", "unexpected EOF",
	"i/o timeout", "connection reset", "context deadline",
}

// internalWording reports the first piece of internal wording in a problem answer.
func internalWording(body []byte) error {
	for _, w := range internalWords {
		if strings.Contains(string(body), w) {
			return fmt.Errorf("the answer quotes %q: %s", w, body)
		}
	}
	return nil
}
