package ride

import (
	"slices"
	"strings"
)

// MaxSortKeys bounds the sort parameter: each key widens the keyset predicate
// and the cursor, and three cover every useful trip ordering.
const MaxSortKeys = 3

// SortKey is one column of a list ordering. The id of the item always follows
// the user's keys as an implicit tiebreaker in the first key's direction, so
// that the order is total and keyset cursors never skip or repeat.
type SortKey struct {
	// Field is the public member name, e.g. "created_at".
	Field string
	// Desc is true for a leading "-" in the parameter.
	Desc bool
}

// ParseSort reads a sort parameter such as "-created_at,fare". Callers apply
// their default when the parameter is absent; present but empty is an error.
// Only names in allowed are accepted, each at most once, at most MaxSortKeys;
// "id" is refused because it is always the tiebreaker. Every problem is a
// *FieldError for the "sort" parameter.
func ParseSort(s string, allowed []string) ([]SortKey, error) {
	if s == "" {
		return nil, &FieldError{Param: "sort", Value: s, Message: "must name at least one field"}
	}
	n := strings.Count(s, ",") + 1
	if n > MaxSortKeys {
		return nil, &FieldError{Param: "sort", Value: s, Message: "at most 3 sort fields are allowed"}
	}
	keys := make([]SortKey, 0, n)
	for token := range strings.SplitSeq(s, ",") {
		field, desc := strings.CutPrefix(token, "-")
		switch {
		case field == "":
			return nil, &FieldError{Param: "sort", Value: s, Message: "empty sort field"}
		case field == "id":
			return nil, &FieldError{Param: "sort", Value: token, Message: "id cannot be sorted on; it always breaks ties"}
		case !slices.Contains(allowed, field):
			return nil, &FieldError{Param: "sort", Value: token, Message: "unknown sort field; allowed: " + strings.Join(allowed, ", ")}
		}
		for _, k := range keys {
			if k.Field == field {
				return nil, &FieldError{Param: "sort", Value: token, Message: "field sorted on more than once"}
			}
		}
		keys = append(keys, SortKey{Field: field, Desc: desc})
	}
	return keys, nil
}

// ParseFields reads a sparse fieldset such as "id,status,fare". Names must be
// in allowed; "id" is always accepted because it is always returned. Repeats
// are harmless and dropped. The result keeps first-seen order and does not add
// "id": the caller does. Present but empty is a *FieldError, as is any
// unknown or empty name.
func ParseFields(s string, allowed []string) ([]string, error) {
	if s == "" {
		return nil, &FieldError{Param: "fields", Value: s, Message: "must name at least one field"}
	}
	fields := make([]string, 0, strings.Count(s, ",")+1)
	for name := range strings.SplitSeq(s, ",") {
		switch {
		case name == "":
			return nil, &FieldError{Param: "fields", Value: s, Message: "empty field name"}
		case name != "id" && !slices.Contains(allowed, name):
			return nil, &FieldError{Param: "fields", Value: name, Message: "unknown field; allowed: " + strings.Join(allowed, ", ")}
		}
		if !slices.Contains(fields, name) {
			fields = append(fields, name)
		}
	}
	return fields, nil
}
