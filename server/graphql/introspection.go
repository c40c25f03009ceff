package graphql

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/rideapi/ride/server/ride"
)

// graphql-go's introspection predates the October 2021 specification: it has no
// __Schema.description and no __Directive.isRepeatable, so the full introspection query of
// graphql-js (schemaDescription, directiveIsRepeatable) fails validation. Such a document runs
// with those fields read as __typename under a response key of the process's own making (the
// field's key behind introspectionMarker), and the answer then gets them back under their
// keys with their values: the schema's description, and false (no directive of the schema
// repeats). A field the client wrote that happens to answer "__Schema" under the same key is
// left alone: no document can name the marker's key.

// introspectionMarker prefixes the response keys of rewritten fields: random per process, so
// that no field of a client's document has such a key.
var introspectionMarker = ride.NewID("ride") + "_" // letters, digits and underscores: a GraphQL name

// introspectionPatch is what a rewritten document's answer needs put back.
type introspectionPatch struct {
	// replacements turn `"key":"__Schema"` and `"key":"__Directive"` into the real values.
	replacements [][2][]byte
}

// apply puts the values of the rewritten fields into an answer's data.
func (p *introspectionPatch) apply(data []byte) []byte {
	if p == nil {
		return data
	}
	for _, r := range p.replacements {
		data = bytes.ReplaceAll(data, r[0], r[1])
	}
	return data
}

// schemaDescription reads the description of the schema definition from SDL.
func schemaDescription(sdl string) *string {
	doc, err := parser.ParseSchema(&ast.Source{Input: sdl})
	if err != nil {
		return nil
	}
	for _, def := range doc.Schema {
		if def.Description != "" {
			d := def.Description
			return &d
		}
	}
	return nil
}

// rewriteIntrospection returns query with __Schema.description and __Directive.isRepeatable
// read as __typename, and the patch for the answer; query itself and nil when it selects
// neither.
func rewriteIntrospection(doc *ast.QueryDocument, query string, description *string) (string, *introspectionPatch) {
	if doc == nil || !strings.Contains(query, "__schema") ||
		(!strings.Contains(query, "description") && !strings.Contains(query, "isRepeatable")) {
		return query, nil
	}
	type found struct {
		field    *ast.Field
		typeName string
	}
	var fields []found
	seen := map[string]bool{}
	var walk func(set ast.SelectionSet, typeName string)
	walk = func(set ast.SelectionSet, typeName string) {
		for _, sel := range set {
			switch sel := sel.(type) {
			case *ast.Field:
				switch {
				case typeName == "__Schema" && sel.Name == "description",
					typeName == "__Directive" && sel.Name == "isRepeatable":
					fields = append(fields, found{sel, typeName})
				}
				child := ""
				switch {
				case sel.Name == "__schema":
					child = "__Schema"
				case typeName == "__Schema" && sel.Name == "directives":
					child = "__Directive"
				}
				walk(sel.SelectionSet, child)
			case *ast.InlineFragment:
				t := typeName
				if sel.TypeCondition != "" {
					t = sel.TypeCondition
				}
				walk(sel.SelectionSet, t)
			case *ast.FragmentSpread:
				def := doc.Fragments.ForName(sel.Name)
				if def == nil || seen[sel.Name+"@"+typeName] {
					continue
				}
				seen[sel.Name+"@"+typeName] = true
				walk(def.SelectionSet, def.TypeCondition)
			}
		}
	}
	for _, op := range doc.Operations {
		walk(op.SelectionSet, "")
	}
	if len(fields) == 0 {
		return query, nil
	}

	text := []rune(query)
	type edit struct {
		start, end int
		with       string
	}
	var edits []edit
	patch := &introspectionPatch{}
	descriptionJSON := []byte("null")
	if description != nil {
		descriptionJSON, _ = json.Marshal(*description)
	}
	for _, f := range fields {
		start := f.field.Position.Start
		// The field's first token is its alias when it has one: `key: name`.
		i := start + len([]rune(f.field.Alias))
		for i < len(text) && strings.ContainsRune(" \t\r\n,", text[i]) {
			i++
		}
		nameAt := start
		if i < len(text) && text[i] == ':' {
			i++
			for i < len(text) && strings.ContainsRune(" \t\r\n,", text[i]) {
				i++
			}
			nameAt = i
		}
		end := nameAt + len([]rune(f.field.Name))
		if end > len(text) || string(text[nameAt:end]) != f.field.Name {
			return query, nil // not where the syntax tree says: run the document as sent
		}
		// `key: name` (or `name`) becomes `<marker>key: __typename`, at the same place.
		edits = append(edits, edit{start, end, introspectionMarker + f.field.Alias + ": __typename"})
		key, _ := json.Marshal(f.field.Alias)
		marked, _ := json.Marshal(introspectionMarker + f.field.Alias)
		typeJSON, _ := json.Marshal(f.typeName)
		from := append(append(append([]byte{}, marked...), ':'), typeJSON...)
		value := []byte("false")
		if f.typeName == "__Schema" {
			value = descriptionJSON
		}
		to := append(append(append([]byte{}, key...), ':'), value...)
		patch.replacements = append(patch.replacements, [2][]byte{from, to})
	}
	slices.SortFunc(edits, func(a, b edit) int { return a.start - b.start })
	edits = slices.CompactFunc(edits, func(a, b edit) bool { return a.start == b.start })
	var out strings.Builder
	last := 0
	for _, e := range edits {
		out.WriteString(string(text[last:e.start]))
		out.WriteString(e.with)
		last = e.end
	}
	out.WriteString(string(text[last:]))
	return out.String(), patch
}
