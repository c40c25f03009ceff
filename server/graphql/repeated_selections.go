package graphql

import (
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/lexer"
)

// A selection repeated exactly in one selection set (`name name name`, the same field with the
// same alias, arguments, directives and sub-selections, the same inline fragment, the same
// spread) runs once: execution merges fields by response name. graphql-go's validation
// compares every pair of fields with one response name, though, so a document of a thousand
// `name`s cost a million comparisons and a hundred megabytes. The analysis removes the
// repeats before graphql-go sees the document, by blanking their text: every remaining token
// keeps its line and column, so the locations of errors still point into the document the
// client sent, and the cost counts what runs.

// withoutRepeatedSelections returns query with every exact repeat of a selection in the same
// selection set blanked out (each character replaced by a space, line breaks kept), and
// whether there was any. doc is query parsed.
func withoutRepeatedSelections(query string, doc *ast.QueryDocument) (string, bool) {
	r := repeats{tokens: selectionTokens(query)}
	if r.tokens == nil {
		return query, false
	}
	for _, op := range doc.Operations {
		r.selectionSet(op.SelectionSet)
	}
	for _, f := range doc.Fragments {
		r.selectionSet(f.SelectionSet)
	}
	if len(r.blank) == 0 {
		return query, false
	}
	text := []rune(query)
	for _, span := range r.blank {
		for i := span[0]; i < span[1] && i < len(text); i++ {
			if text[i] != '\n' && text[i] != '\r' {
				text[i] = ' '
			}
		}
	}
	return string(text), true
}

// token is a token of the document: its kind and where it starts and ends, in runes.
type token struct {
	kind       lexer.Type
	start, end int
}

// selectionTokens lexes query, comments left out; nil when it does not lex (it parsed, so it
// does).
func selectionTokens(query string) []token {
	lex := lexer.New(&ast.Source{Input: query})
	var tokens []token
	for {
		t, err := lex.ReadToken()
		if err != nil {
			return nil
		}
		if t.Kind == lexer.EOF {
			return tokens
		}
		if t.Kind != lexer.Comment {
			tokens = append(tokens, token{kind: t.Kind, start: t.Pos.Start, end: t.Pos.End})
		}
	}
}

// repeats finds the repeated selections of a document.
type repeats struct {
	tokens []token
	// blank are the spans of text to blank, in runes: [start, end).
	blank [][2]int
}

// selectionSet finds the repeats in set and below it, and returns the keys of its selections,
// which are equal exactly when two selections are repeats of each other.
func (r *repeats) selectionSet(set ast.SelectionSet) []string {
	keys := make([]string, len(set))
	seen := make(map[string]bool, len(set))
	for i, sel := range set {
		keys[i] = r.key(sel)
		if !seen[keys[i]] {
			seen[keys[i]] = true
			continue
		}
		if span, ok := r.span(set, i); ok {
			r.blank = append(r.blank, span)
		}
	}
	return keys
}

// key spells a selection out canonically: kind, alias and name (or type condition or fragment
// name), arguments, directives, and the keys of its own selections in order.
func (r *repeats) key(sel ast.Selection) string {
	var b strings.Builder
	var children ast.SelectionSet
	switch sel := sel.(type) {
	case *ast.Field:
		b.WriteString("F" + sel.Alias + ":" + sel.Name)
		writeArguments(&b, sel.Arguments)
		writeDirectives(&b, sel.Directives)
		children = sel.SelectionSet
	case *ast.InlineFragment:
		b.WriteString("I" + sel.TypeCondition)
		writeDirectives(&b, sel.Directives)
		children = sel.SelectionSet
	case *ast.FragmentSpread:
		b.WriteString("S" + sel.Name)
		writeDirectives(&b, sel.Directives)
	}
	if children != nil {
		b.WriteByte('{')
		for _, k := range r.selectionSet(children) {
			b.WriteString(k)
			b.WriteByte(' ')
		}
		b.WriteByte('}')
	}
	return b.String()
}

func writeArguments(b *strings.Builder, args ast.ArgumentList) {
	if len(args) == 0 {
		return
	}
	b.WriteByte('(')
	for _, a := range args {
		b.WriteString(a.Name + ":" + a.Value.String() + " ")
	}
	b.WriteByte(')')
}

func writeDirectives(b *strings.Builder, directives ast.DirectiveList) {
	for _, d := range directives {
		b.WriteString("@" + d.Name)
		writeArguments(b, d.Arguments)
	}
}

// span is the text of the i-th selection of set: from its first token to the first token of
// the next selection, or to the brace that closes the set.
func (r *repeats) span(set ast.SelectionSet, i int) ([2]int, bool) {
	first, ok := r.firstToken(set[i])
	if !ok {
		return [2]int{}, false
	}
	if i+1 < len(set) {
		next, ok := r.firstToken(set[i+1])
		if !ok {
			return [2]int{}, false
		}
		return [2]int{r.tokens[first].start, r.tokens[next].start}, true
	}
	depth := 0
	for t := first; t < len(r.tokens); t++ {
		switch r.tokens[t].kind {
		case lexer.BraceL, lexer.ParenL, lexer.BracketL:
			depth++
		case lexer.BraceR, lexer.ParenR, lexer.BracketR:
			if depth == 0 {
				return [2]int{r.tokens[first].start, r.tokens[t].start}, true
			}
			depth--
		}
	}
	return [2]int{}, false
}

// firstToken is the index of a selection's first token: its alias or name for a field, the
// spread (`...`) before the position gqlparser gives a fragment.
func (r *repeats) firstToken(sel ast.Selection) (int, bool) {
	var pos *ast.Position
	fragment := false
	switch sel := sel.(type) {
	case *ast.Field:
		pos = sel.Position
	case *ast.InlineFragment:
		pos, fragment = sel.Position, true
	case *ast.FragmentSpread:
		pos, fragment = sel.Position, true
	}
	if pos == nil {
		return 0, false
	}
	t, found := tokenAt(r.tokens, pos.Start)
	if !found {
		return 0, false
	}
	if fragment {
		if t == 0 || r.tokens[t-1].kind != lexer.Spread {
			return 0, false
		}
		t--
	}
	return t, true
}

// tokenAt finds the token that starts at rune offset start.
func tokenAt(tokens []token, start int) (int, bool) {
	lo, hi := 0, len(tokens)
	for lo < hi {
		mid := (lo + hi) / 2
		if tokens[mid].start < start {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, lo < len(tokens) && tokens[lo].start == start
}
