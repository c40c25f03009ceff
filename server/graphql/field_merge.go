package graphql

import (
	"sort"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
)

// Fields of one response name in a selection set, fragments expanded, must be the same field
// with the same arguments, and their own selections must merge in turn ("field selection
// merging" in the GraphQL specification). graphql-go checks this by comparing the fields in
// pairs and reports every conflicting pair, so a document of a few hundred `a: driver(id: …)`
// with distinct ids made tens of thousands of errors. mergeConflict checks the same rule by
// grouping, in time linear in the fields the document runs (which the cost bounds), and
// reports the first conflict alone; graphql-go then finds none.

// mergeConflict returns the first conflict of the operation's selections, or nil.
func mergeConflict(doc *ast.QueryDocument, op *ast.OperationDefinition) *requestError {
	m := mergeCheck{fragments: make(map[string]*ast.FragmentDefinition, len(doc.Fragments)), spreading: map[string]bool{}}
	for _, f := range doc.Fragments {
		m.fragments[f.Name] = f
	}
	return m.sets([]ast.SelectionSet{op.SelectionSet})
}

type mergeCheck struct {
	fragments map[string]*ast.FragmentDefinition
	spreading map[string]bool // fragments being expanded (cycles are refused elsewhere)
}

// sets checks the selection sets that run as one: a field's, or those of the fields of one
// response name, merged.
func (m *mergeCheck) sets(sets []ast.SelectionSet) *requestError {
	groups := map[string][]*ast.Field{}
	var order []string
	var collect func(set ast.SelectionSet)
	collect = func(set ast.SelectionSet) {
		for _, sel := range set {
			switch sel := sel.(type) {
			case *ast.Field:
				key := sel.Alias
				if key == "" {
					key = sel.Name
				}
				if _, ok := groups[key]; !ok {
					order = append(order, key)
				}
				groups[key] = append(groups[key], sel)
			case *ast.InlineFragment:
				collect(sel.SelectionSet)
			case *ast.FragmentSpread:
				if def := m.fragments[sel.Name]; def != nil && !m.spreading[sel.Name] {
					m.spreading[sel.Name] = true
					collect(def.SelectionSet)
					delete(m.spreading, sel.Name)
				}
			}
		}
	}
	for _, set := range sets {
		collect(set)
	}
	for _, key := range order {
		fields := groups[key]
		first, firstArgs := fields[0], argumentsKey(fields[0].Arguments)
		var children []ast.SelectionSet
		for _, f := range fields {
			switch {
			case f.Name != first.Name:
				return conflictError(key, `"`+first.Name+`" and "`+f.Name+`" are different fields`, first, f)
			case argumentsKey(f.Arguments) != firstArgs:
				return conflictError(key, "they have differing arguments", first, f)
			}
			if len(f.SelectionSet) > 0 {
				children = append(children, f.SelectionSet)
			}
		}
		if len(children) > 0 {
			if err := m.sets(children); err != nil {
				return err
			}
		}
	}
	return nil
}

// argumentsKey spells arguments out in name order: their order does not matter.
func argumentsKey(args ast.ArgumentList) string {
	if len(args) == 0 {
		return ""
	}
	spelled := make([]string, len(args))
	for i, a := range args {
		spelled[i] = a.Name + ":" + a.Value.String()
	}
	sort.Strings(spelled)
	return strings.Join(spelled, ",")
}

func conflictError(key, reason string, a, b *ast.Field) *requestError {
	return newRequestError(gqlCodeValidationFailed,
		"Fields %q conflict because %s. Use different aliases on the fields to fetch both if this was intentional.", key, reason).
		at(a.Position).at(b.Position)
}
