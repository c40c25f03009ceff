package graphql

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	gqlerrors "github.com/graph-gophers/graphql-go/errors"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/rideapi/ride/server/problem"
	"github.com/rideapi/ride/server/ride"
)

// Limits of the query interface (API-CONTRACT "GraphQL"). They are checked on the parsed
// document before anything runs, so a document over a limit costs no database work.
const (
	// graphQLMaxLength bounds the document in characters (not bytes).
	graphQLMaxLength = 10_000
	// graphQLMaxDepth bounds how deeply data fields nest: `trip { driver { name } }` is 3.
	graphQLMaxDepth = 10
	// graphQLMaxIntrospectionDepth bounds selections under `__schema` and `__type`. The
	// introspection query of GraphiQL and of code generators nests `ofType` about 13 deep, and
	// the schema bounds what it returns, so it gets its own, larger limit.
	graphQLMaxIntrospectionDepth = 20
	// graphQLMaxIntrospectionLists bounds how many of the introspection list fields that lead
	// back to types (fields, inputFields, interfaces, possibleTypes) may nest: the meta-schema is
	// cyclic, so depth alone lets a short query fan out exponentially. graphql-js's
	// MaxIntrospectionDepthRule sets the same bound; real introspection queries nest one.
	graphQLMaxIntrospectionLists = 2
	// graphQLMaxCost is the field budget of one request: every field that runs counts 1,
	// fragments expanded at each place they are spread, a selection repeated exactly in one
	// selection set once (it runs once).
	graphQLMaxCost = 1_000
	// graphQLMaxOverlapPairs bounds the pairs of selections graphql-go compares to check that
	// fields of one response name merge: fields of one name side by side, and each fragment
	// with everything beside it. Documents of a client count a few hundred.
	graphQLMaxOverlapPairs = 20_000
)

// GraphQL error codes (`extensions.code`) of the protocol, the ones Apollo's clients and
// servers use. A refused or failed field carries the catalogue's own code, in capitals.
var (
	gqlCodeForbidden = strings.ToUpper(problem.Forbidden)
	gqlCodeNotFound  = strings.ToUpper(problem.NotFound)
	gqlCodeInternal  = strings.ToUpper(problem.Internal)
)

const (
	gqlCodeBadRequest                 = "BAD_REQUEST"
	gqlCodeBadUserInput               = "BAD_USER_INPUT"
	gqlCodeParseFailed                = "GRAPHQL_PARSE_FAILED"
	gqlCodeValidationFailed           = "GRAPHQL_VALIDATION_FAILED"
	gqlCodeOperationResolutionFailure = "OPERATION_RESOLUTION_FAILURE"
	gqlCodeTooLong                    = "QUERY_TOO_LONG"
	gqlCodeTooDeep                    = "QUERY_TOO_DEEP"
	gqlCodeTooComplex                 = "QUERY_TOO_COMPLEX"
	gqlCodePersistedQueryNotFound     = "PERSISTED_QUERY_NOT_FOUND"
	gqlCodePersistedQueryHashMismatch = "PERSISTED_QUERY_HASH_MISMATCH"
	// gqlCodeTooManyOperations refuses an operation a socket starts past wsMaxOperations.
	gqlCodeTooManyOperations = "TOO_MANY_OPERATIONS"
)

// requestError is a GraphQL error found before execution: the document does not run, and the
// answer is 400 (200 for an unknown persisted query, which clients treat as a cue, not a fault).
type requestError struct {
	code      string
	message   string
	locations []gqlerrors.Location
}

func newRequestError(code, format string, args ...any) *requestError {
	return &requestError{code: code, message: fmt.Sprintf(format, args...)}
}

func (e *requestError) at(pos *ast.Position) *requestError {
	if pos != nil {
		e.locations = append(e.locations, gqlerrors.Location{Line: pos.Line, Column: pos.Column})
	}
	return e
}

// documentAnalysis is what the server learns from a document before running it.
type documentAnalysis struct {
	// query is the document to run: the one sent, with exact repeats of a selection blanked
	// out (withoutRepeatedSelections); doc is it parsed.
	query     string
	doc       *ast.QueryDocument
	operation *ast.OperationDefinition
	// cost is the number of fields the operation runs: fragments expanded at each place
	// they are spread, a selection repeated exactly in one selection set counted once.
	cost int
	// plan runs the operation without graphql-go; nil when it is not plain (plan.go).
	plan *plan
}

// documentCache remembers the analyses of documents that passed, so that a client sending the
// same query again and again (the normal case: queries are constants in client code, with
// variables) is not parsed and walked each time. An analysis is never changed after it is
// made, so concurrent requests share it.
//
// Each account has a part of its own, bounded by documentCacheSize documents and
// documentCacheBytes of their text: past either, arbitrary entries of the same account make
// room, so no account's documents push out another's, and whether a document is cached, which
// the time of an answer tells, says nothing of what another account sent. An analysis (its
// syntax tree, and its plan) holds about 80 times its text, so an account's part holds a few
// hundred documents of a client, or at most some 5 MB of analyses of the longest ones. Past
// documentCacheAccounts accounts, the part of an arbitrary other account is forgotten
// whole, which bounds the cache at some 160 MB.
type documentCache struct {
	// prepare completes an analysis that passed before it is cached (the Handler compiles its
	// plan); nil: nothing to add.
	prepare func(documentAnalysis) documentAnalysis

	mu       sync.RWMutex
	accounts map[string]*accountDocuments
}

// accountDocuments is one account's part of the cache.
type accountDocuments struct {
	entries map[documentKey]documentAnalysis
	bytes   int // the text of the keys of entries
}

type documentKey struct{ query, operationName string }

func (k documentKey) size() int { return len(k.query) + len(k.operationName) }

const (
	documentCacheSize     = 256
	documentCacheBytes    = 64 << 10
	documentCacheAccounts = 32
)

// analyze returns the analysis of a document an account sent, from the cache when it has one.
func (c *documentCache) analyze(account, query, operationName string) (documentAnalysis, *requestError) {
	key := documentKey{query, operationName}
	c.mu.RLock()
	var a documentAnalysis
	own, ok := c.accounts[account]
	if ok {
		a, ok = own.entries[key]
	}
	c.mu.RUnlock()
	if ok {
		return a, nil
	}
	a, reqErr := analyzeDocument(query, operationName)
	if reqErr != nil {
		return a, reqErr
	}
	if c.prepare != nil {
		a = c.prepare(a)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.accounts == nil {
		c.accounts = map[string]*accountDocuments{}
	}
	own = c.accounts[account]
	if own == nil {
		for other := range c.accounts { // Go's map order is random
			if len(c.accounts) < documentCacheAccounts {
				break
			}
			delete(c.accounts, other)
		}
		own = &accountDocuments{entries: map[documentKey]documentAnalysis{}}
		c.accounts[account] = own
	}
	if _, cached := own.entries[key]; cached {
		return a, nil // analysed by a concurrent request meanwhile
	}
	for k := range own.entries {
		if len(own.entries) < documentCacheSize && own.bytes+key.size() <= documentCacheBytes {
			break
		}
		delete(own.entries, k)
		own.bytes -= k.size()
	}
	own.entries[key] = a
	own.bytes += key.size()
	return a, nil
}

// analyzeDocument parses a document, picks the operation to run, and checks it against the
// limits. graphql-go validates and runs the document afterwards; it has neither a cost limit nor
// an exported parser, hence this walk over gqlparser's syntax tree. The returned analysis has
// its cost set whenever the document parsed, even alongside an error.
func analyzeDocument(query, operationName string) (documentAnalysis, *requestError) {
	var a documentAnalysis
	if n := utf8.RuneCountInString(query); n > graphQLMaxLength {
		return a, newRequestError(gqlCodeTooLong,
			"The document is %d characters long; the limit is %d.", n, graphQLMaxLength)
	}
	doc, err := parser.ParseQuery(&ast.Source{Input: query})
	if err != nil {
		return a, parseError(err)
	}
	if without, repeated := withoutRepeatedSelections(query, doc); repeated {
		// The same document with fewer selections, at the same positions: it parses.
		if doc, err = parser.ParseQuery(&ast.Source{Input: without}); err != nil {
			return a, parseError(err)
		}
		query = without
	}
	a.query, a.doc = query, doc
	op, reqErr := selectOperation(doc, operationName)
	if reqErr != nil {
		return a, reqErr
	}
	a.operation = op

	w := newSelectionWalker(doc)
	m := w.selectionSet(op.SelectionSet)
	a.cost = m.fields
	switch {
	case w.err != nil:
		return a, w.err
	case op.Operation == ast.Mutation:
		return a, newRequestError(gqlCodeBadRequest,
			"This API offers queries and subscriptions; %s operations are not supported.", op.Operation).at(op.Position)
	case m.depth > graphQLMaxDepth:
		return a, newRequestError(gqlCodeTooDeep,
			"The query nests fields %d deep; the limit is %d.", m.depth, graphQLMaxDepth).at(op.Position)
	case m.introspectionDepth > graphQLMaxIntrospectionDepth:
		return a, newRequestError(gqlCodeTooDeep,
			"The introspection query nests fields %d deep; the limit is %d.", m.introspectionDepth, graphQLMaxIntrospectionDepth).at(op.Position)
	case m.introspectionLists > graphQLMaxIntrospectionLists:
		return a, newRequestError(gqlCodeTooDeep,
			"The introspection query nests fields, inputFields, interfaces or possibleTypes %d deep; the limit is %d.",
			m.introspectionLists, graphQLMaxIntrospectionLists).at(op.Position)
	case m.fields > graphQLMaxCost:
		return a, newRequestError(gqlCodeTooComplex,
			"The query selects %d fields; the limit is %d. Ask for fewer fields, or split the query.", m.fields, graphQLMaxCost).at(op.Position)
	}
	// Within the cost, fields expanded: checking that they merge is linear in it.
	if err := mergeConflict(doc, op); err != nil {
		return a, err
	}
	return a, nil
}

func parseError(err error) *requestError {
	e := &requestError{code: gqlCodeParseFailed, message: err.Error()}
	if gqlErr, ok := err.(*gqlerror.Error); ok {
		e.message = "Syntax error: " + gqlErr.Message
		for _, loc := range gqlErr.Locations {
			e.locations = append(e.locations, gqlerrors.Location{Line: loc.Line, Column: loc.Column})
		}
	}
	return e
}

// selectOperation applies the GraphQL rules for choosing the operation to run.
func selectOperation(doc *ast.QueryDocument, name string) (*ast.OperationDefinition, *requestError) {
	switch {
	case len(doc.Operations) == 0:
		return nil, newRequestError(gqlCodeOperationResolutionFailure, "The document has no operation to run.")
	case name != "":
		if op := doc.Operations.ForName(name); op != nil {
			return op, nil
		}
		return nil, newRequestError(gqlCodeOperationResolutionFailure, "The document has no operation named %q.", name)
	case len(doc.Operations) > 1:
		return nil, newRequestError(gqlCodeOperationResolutionFailure,
			"The document has %d operations; name the one to run in operationName.", len(doc.Operations))
	}
	return doc.Operations[0], nil
}

// selectionMeasure describes a selection set once expanded: how many fields it selects and how
// deeply they nest, data and introspection apart.
type selectionMeasure struct {
	fields             int
	depth              int
	introspectionDepth int
	// typeLists is how deeply fields named like the introspection lists that lead back to types
	// nest; introspectionLists is the same under __schema and __type, where it counts.
	typeLists          int
	introspectionLists int
}

// introspectionTypeLists are the introspection fields whose items lead back to __Type.
var introspectionTypeLists = map[string]bool{"fields": true, "inputFields": true, "interfaces": true, "possibleTypes": true}

// selectionWalker measures selection sets. Each fragment is measured once and its measure
// reused wherever it is spread, so fragments spreading fragments several times cost linear
// time while their (exponential) field count is still counted in full, saturating at MaxInt32.
type selectionWalker struct {
	fragments map[string]*ast.FragmentDefinition
	measured  map[string]selectionMeasure
	active    map[string]bool
	err       *requestError
}

func newSelectionWalker(doc *ast.QueryDocument) *selectionWalker {
	w := &selectionWalker{
		fragments: make(map[string]*ast.FragmentDefinition, len(doc.Fragments)),
		measured:  map[string]selectionMeasure{},
		active:    map[string]bool{},
	}
	for _, f := range doc.Fragments {
		w.fragments[f.Name] = f
	}
	return w
}

func (w *selectionWalker) selectionSet(set ast.SelectionSet) selectionMeasure {
	var m selectionMeasure
	for _, sel := range set {
		var child selectionMeasure
		switch sel := sel.(type) {
		case *ast.Field:
			inner := w.selectionSet(sel.SelectionSet)
			depth := 1 + max(inner.depth, inner.introspectionDepth)
			child = selectionMeasure{fields: addCost(1, inner.fields), typeLists: inner.typeLists,
				introspectionLists: inner.introspectionLists}
			if introspectionTypeLists[sel.Name] {
				child.typeLists++
			}
			if sel.Name == "__schema" || sel.Name == "__type" {
				child.introspectionDepth = depth
				child.introspectionLists = max(child.introspectionLists, inner.typeLists)
			} else {
				child.depth = depth
			}
		case *ast.InlineFragment:
			child = w.selectionSet(sel.SelectionSet)
		case *ast.FragmentSpread:
			child = w.fragment(sel)
		}
		m.fields = addCost(m.fields, child.fields)
		m.depth = max(m.depth, child.depth)
		m.introspectionDepth = max(m.introspectionDepth, child.introspectionDepth)
		m.typeLists = max(m.typeLists, child.typeLists)
		m.introspectionLists = max(m.introspectionLists, child.introspectionLists)
	}
	return m
}

func (w *selectionWalker) fragment(spread *ast.FragmentSpread) selectionMeasure {
	if m, ok := w.measured[spread.Name]; ok {
		return m
	}
	def := w.fragments[spread.Name]
	if def == nil {
		return selectionMeasure{} // graphql-go's validation names the unknown fragment
	}
	if w.active[spread.Name] {
		if w.err == nil {
			w.err = newRequestError(gqlCodeValidationFailed,
				"Cannot spread fragment %q within itself.", spread.Name).at(spread.Position)
		}
		return selectionMeasure{}
	}
	w.active[spread.Name] = true
	m := w.selectionSet(def.SelectionSet)
	delete(w.active, spread.Name)
	w.measured[spread.Name] = m
	return m
}

func addCost(a, b int) int {
	if sum := a + b; sum <= math.MaxInt32 {
		return sum
	}
	return math.MaxInt32
}

// rootIDs lists the ids of the root fields named field (`trip` or `driver`) of the operation,
// resolving variables, so the request can load them all in one query before the first resolver
// asks. It may over-approximate (a field under @skip), never matters for correctness: a
// resolver whose id was not foreseen loads it alone. Ids that cannot name a record of kind
// prefix are left out.
func (a documentAnalysis) rootIDs(field, prefix string, variables map[string]any) []string {
	var ids []string
	seen := map[string]bool{}
	visited := map[string]bool{}
	var walk func(set ast.SelectionSet)
	walk = func(set ast.SelectionSet) {
		for _, sel := range set {
			switch sel := sel.(type) {
			case *ast.Field:
				if sel.Name != field {
					continue
				}
				arg := sel.Arguments.ForName("id")
				if arg == nil {
					continue
				}
				if id, ok := a.idValue(arg.Value, variables); ok && !seen[id] && ride.ValidID(prefix, id) {
					seen[id] = true
					ids = append(ids, id)
				}
			case *ast.InlineFragment:
				walk(sel.SelectionSet)
			case *ast.FragmentSpread:
				if def := a.doc.Fragments.ForName(sel.Name); def != nil && !visited[sel.Name] {
					visited[sel.Name] = true
					walk(def.SelectionSet)
				}
			}
		}
	}
	walk(a.operation.SelectionSet)
	return ids
}

// idValue is the ID an argument value denotes: a literal, or a variable's value (or default).
func (a documentAnalysis) idValue(v *ast.Value, variables map[string]any) (string, bool) {
	if v == nil {
		return "", false
	}
	switch v.Kind {
	case ast.StringValue, ast.BlockValue, ast.IntValue:
		return v.Raw, true
	case ast.Variable:
		if value, ok := variables[v.Raw]; ok {
			return idFromJSON(value)
		}
		if def := a.operation.VariableDefinitions.ForName(v.Raw); def != nil && def.DefaultValue != nil {
			return a.idValue(def.DefaultValue, nil)
		}
	}
	return "", false
}

func idFromJSON(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return strconv.FormatInt(int64(v), 10), true
		}
	}
	return "", false
}
