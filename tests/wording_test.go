package tests

import (
	"fmt"
	"regexp"
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

// resourceID matches an id of the API: a prefix and 26 characters of base32.
var resourceID = regexp.MustCompile(`\b[a-z]{2,4}_[a-z2-7]{26}\b`)

// internalWording reports the first piece of internal wording in a problem answer.
func internalWording(body []byte) error {
	// Ids are random base32 and may spell anything ("est_7jxg2gorm…"): they are left out.
	text := resourceID.ReplaceAllString(string(body), "")
	for _, w := range internalWords {
		if strings.Contains(text, w) {
			return fmt.Errorf("the answer quotes %q: %s", w, body)
		}
	}
	return nil
}
