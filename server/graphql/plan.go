package graphql

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	gqlast "github.com/graph-gophers/graphql-go/ast"
	gqlerrors "github.com/graph-gophers/graphql-go/errors"
	"github.com/vektah/gqlparser/v2/ast"
)

// Plans. graphql-go parses and validates a document on every request, and runs every field
// through its generic machinery; most requests send one of a few constant documents with
// different variables, and most of those are plain: fields, aliases and variables, nothing
// else. Such a document, once graphql-go has validated it, is compiled into a plan: its fields
// bound to the resolvers' methods, its response keys written out. A request for a planned
// document then calls the same resolvers, in the same order, and writes the same bytes
// graphql-go would (server/graphql_plan_test.go runs both on the same data and compares them),
// without parsing, validating or starting a goroutine.
//
// A plan takes:
//   - a query operation without directives, whose variables are all `ID!` without a default;
//   - fields of object types, with any alias, `__typename`, and root fields whose arguments are
//     string literals or those variables;
//   - response keys that are unique in their selection set (graphql-go would merge repeats).
//
// Anything else (fragments, directives, lists, introspection) runs through graphql-go, as does
// a request whose variables are not exactly the declared ones as strings, and one during
// which a field of a non-null type resolves to null or an enum to a value it does not have:
// the plan stops, writes nothing, and graphql-go runs the request from the start, so every
// error message is graphql-go's own. A resolver's error, the one failure resolvers report,
// is answered as graphql-go answers it: the field is null and the error carries its path.

// plan is a compiled document.
type plan struct {
	vars   []string // the declared variables, all ID!
	fields []planField
}

type planKind uint8

const (
	planObject planKind = iota
	planScalar
	planEnum
	planTypename
)

// planField is one field of a selection set, bound to its resolver.
type planField struct {
	alias string // the response key, which paths name
	key   []byte // `"responseKey":`
	kind  planKind

	method   reflect.Value // the method's func value (receiver first); unset for __typename
	takesCtx bool
	args     reflect.Type // the arguments struct, when the field takes arguments
	argSets  []planArg
	hasError bool // the method returns (value, error)

	nonNull bool
	enum    map[string]bool // planEnum: the enum's values
	write   scalarWriter    // planScalar and planEnum: the typed call, when there is one
	call    objectCaller    // planObject: the typed call, when there is one
	quoted  []byte          // planTypename: the type's name as a JSON string
	fields  []planField     // planObject: the selection under it
}

// planArg sets one field of a resolver's arguments struct: from a literal, or a variable.
type planArg struct {
	index    int
	literal  string
	variable string
}

var (
	contextType  = reflect.TypeFor[context.Context]()
	errorType    = reflect.TypeFor[error]()
	idInputType  = reflect.TypeFor[idInput]()
	stringerType = reflect.TypeFor[fmt.Stringer]()
)

// compilePlan returns the plan of a valid document's operation, or nil when it is not plain
// (see above). The document must have passed graphql-go's validation.
func compilePlan(sch *gqlast.Schema, root reflect.Type, op *ast.OperationDefinition) *plan {
	if op.Operation != ast.Query || len(op.Directives) > 0 {
		return nil
	}
	p := &plan{}
	for _, v := range op.VariableDefinitions {
		if v.DefaultValue != nil || len(v.Directives) > 0 || v.Type.String() != "ID!" {
			return nil
		}
		p.vars = append(p.vars, v.Variable)
	}
	query, ok := sch.RootOperationTypes["query"].(*gqlast.ObjectTypeDefinition)
	if !ok {
		return nil
	}
	fields, ok := compileSelection(query, root, op.SelectionSet, p.vars)
	if !ok {
		return nil
	}
	p.fields = fields
	return p
}

func compileSelection(typ *gqlast.ObjectTypeDefinition, recv reflect.Type, set ast.SelectionSet, vars []string) ([]planField, bool) {
	out := make([]planField, 0, len(set))
	keys := make(map[string]bool, len(set))
	for _, sel := range set {
		f, isField := sel.(*ast.Field)
		if !isField || len(f.Directives) > 0 || keys[f.Alias] {
			return nil, false
		}
		keys[f.Alias] = true
		pf := planField{alias: f.Alias, key: []byte(`"` + f.Alias + `":`)}
		if f.Name == "__typename" {
			pf.kind, pf.quoted = planTypename, []byte(`"`+typ.Name+`"`)
			out = append(out, pf)
			continue
		}
		def := typ.Fields.Get(f.Name)
		if def == nil || strings.HasPrefix(f.Name, "__") {
			return nil, false
		}
		m, ok := resolverMethod(recv, f.Name)
		if !ok {
			return nil, false
		}
		pf.method = m.Func
		ft, resultType, ok := bindSignature(&pf, m.Type, def, f.Arguments, vars)
		if !ok {
			return nil, false
		}
		if nn, isNonNull := ft.(*gqlast.NonNull); isNonNull {
			pf.nonNull, ft = true, nn.OfType
		}
		switch t := ft.(type) {
		case *gqlast.ObjectTypeDefinition:
			if len(f.SelectionSet) == 0 {
				return nil, false
			}
			pf.kind = planObject
			if pf.fields, ok = compileSelection(t, resultType, f.SelectionSet, vars); !ok {
				return nil, false
			}
		case *gqlast.ScalarTypeDefinition:
			pf.kind = planScalar
		case *gqlast.EnumTypeDefinition:
			// graphql-go spells an enum value by its String method when it has one.
			if underlying(resultType).Kind() != reflect.String || resultType.Implements(stringerType) {
				return nil, false
			}
			pf.kind, pf.enum = planEnum, make(map[string]bool, len(t.EnumValuesDefinition))
			for _, v := range t.EnumValuesDefinition {
				pf.enum[v.EnumValue] = true
			}
		default: // lists, interfaces, unions
			return nil, false
		}
		if typed := scalarWriters[recv]; typed != nil && pf.kind != planObject {
			pf.write = typed(m, &pf)
		}
		if typed := objectCallers[recv]; typed != nil && pf.kind == planObject && len(pf.argSets) <= 1 {
			pf.call = typed(m)
		}
		out = append(out, pf)
	}
	return out, true
}

// resolverMethod finds a field's method as graphql-go does: by name, ignoring case and
// underscores.
func resolverMethod(recv reflect.Type, field string) (reflect.Method, bool) {
	want := strings.ReplaceAll(field, "_", "")
	for i := range recv.NumMethod() {
		if m := recv.Method(i); strings.EqualFold(want, strings.ReplaceAll(m.Name, "_", "")) {
			return m, true
		}
	}
	return reflect.Method{}, false
}

// bindSignature reads a resolver method's parameters (receiver, then optionally a context,
// then optionally an arguments struct) and results (a value, optionally an error), and binds
// the document's arguments. It returns the field's schema type and the method's value type.
func bindSignature(pf *planField, mt reflect.Type, def *gqlast.FieldDefinition, args ast.ArgumentList, vars []string) (gqlast.Type, reflect.Type, bool) {
	in := 1 // the receiver
	if in < mt.NumIn() && mt.In(in) == contextType {
		pf.takesCtx = true
		in++
	}
	if in < mt.NumIn() {
		pf.args = mt.In(in)
		in++
		if pf.args.Kind() != reflect.Struct || len(args) != len(def.Arguments) {
			return nil, nil, false
		}
		for _, a := range args {
			sf, ok := pf.args.FieldByNameFunc(func(n string) bool { return strings.EqualFold(n, a.Name) })
			if !ok || len(sf.Index) != 1 || sf.Type != idInputType {
				return nil, nil, false
			}
			arg := planArg{index: sf.Index[0]}
			switch a.Value.Kind {
			case ast.StringValue:
				arg.literal = a.Value.Raw
			case ast.Variable:
				if !slices.Contains(vars, a.Value.Raw) {
					return nil, nil, false
				}
				arg.variable = a.Value.Raw
			default:
				return nil, nil, false
			}
			pf.argSets = append(pf.argSets, arg)
		}
	} else if len(args) > 0 {
		return nil, nil, false
	}
	switch {
	case in != mt.NumIn():
		return nil, nil, false
	case mt.NumOut() == 2 && mt.Out(1) == errorType:
		pf.hasError = true
	case mt.NumOut() != 1:
		return nil, nil, false
	}
	return def.Type, mt.Out(0), true
}

func underlying(t reflect.Type) reflect.Type {
	if t.Kind() == reflect.Pointer {
		return t.Elem()
	}
	return t
}

// planRun is one execution of a plan.
type planRun struct {
	ctx    context.Context
	vars   map[string]any
	out    bytes.Buffer
	errors []*gqlerrors.QueryError
	path   []any
}

// planStop stops a plan whose request graphql-go must run instead.
type planStop struct{}

// run executes the plan against the root resolver. It returns the data and the fields' errors
// as graphql-go returns them, and false when the request must run through graphql-go instead
// (nothing of the plan's run is then kept).
func (p *plan) run(ctx context.Context, root any, variables map[string]any) (data []byte, errs []*gqlerrors.QueryError, ok bool) {
	if len(variables) != len(p.vars) {
		return nil, nil, false
	}
	for _, name := range p.vars {
		if _, isString := variables[name].(string); !isString {
			return nil, nil, false
		}
	}
	r := &planRun{ctx: ctx, vars: variables}
	defer func() {
		// A panicking resolver, or a field the plan cannot answer: graphql-go runs the request
		// and reports it.
		if v := recover(); v != nil {
			data, errs, ok = nil, nil, false
		}
	}()
	r.object(p.fields, root)
	return r.out.Bytes(), r.errors, true
}

func (r *planRun) object(fields []planField, node any) {
	r.out.WriteByte('{')
	for i := range fields {
		f := &fields[i]
		if i > 0 {
			r.out.WriteByte(',')
		}
		r.out.Write(f.key)
		switch {
		case f.kind == planTypename:
			r.out.Write(f.quoted)
		case f.write != nil:
			f.write(node, &r.out)
		default:
			r.path = append(r.path, f.alias)
			r.field(f, node)
			r.path = r.path[:len(r.path)-1]
		}
	}
	r.out.WriteByte('}')
}

// argument is the value of a field's argument: its literal, or its variable's value.
func (r *planRun) argument(a planArg) string {
	if a.variable != "" {
		return r.vars[a.variable].(string)
	}
	return a.literal
}

func (r *planRun) field(f *planField, node any) {
	var v any
	var err error
	if f.call != nil {
		var id string
		if len(f.argSets) == 1 {
			id = r.argument(f.argSets[0])
		}
		v, err = f.call(r.ctx, node, id)
	} else {
		v, err = r.reflectCall(f, node)
	}
	switch {
	case err != nil:
		if f.nonNull {
			panic(planStop{})
		}
		qe := gqlerrors.Errorf("%s", err)
		qe.Path = append([]any(nil), r.path...)
		qe.ResolverError = err
		if ex, ok := err.(interface{ Extensions() map[string]any }); ok {
			qe.Extensions = ex.Extensions()
		}
		r.errors = append(r.errors, qe)
		r.out.WriteString("null")
	case v == nil:
		if f.nonNull {
			panic(planStop{})
		}
		r.out.WriteString("null")
	case f.kind == planObject:
		r.object(f.fields, v)
	case f.kind == planEnum:
		writeEnum(&r.out, f.enum, reflect.Indirect(reflect.ValueOf(v)).String())
	default: // planScalar
		b, err := json.Marshal(reflect.Indirect(reflect.ValueOf(v)).Interface())
		if err != nil {
			panic(planStop{})
		}
		r.out.Write(b)
	}
}

// reflectCall calls a field's method through reflect: its value (nil for a nil pointer or
// interface) and its error.
func (r *planRun) reflectCall(f *planField, node any) (any, error) {
	in := make([]reflect.Value, 1, 3)
	in[0] = reflect.ValueOf(node)
	if f.takesCtx {
		in = append(in, reflect.ValueOf(r.ctx))
	}
	if f.args != nil {
		args := reflect.New(f.args).Elem()
		for _, a := range f.argSets {
			args.Field(a.index).SetString(r.argument(a))
		}
		in = append(in, args)
	}
	res := f.method.Call(in)
	if f.hasError && !res[1].IsNil() {
		return nil, res[1].Interface().(error)
	}
	v := res[0]
	if (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && v.IsNil() {
		return nil, nil
	}
	return v.Interface(), nil
}
