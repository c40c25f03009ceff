package graphql

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"reflect"
	"strconv"

	graphql "github.com/graph-gophers/graphql-go"
)

// Fields without reflection. A plan calls a field's method through reflect unless its node type
// is listed in scalarWriters (scalar and enum fields) or objectCallers (fields of object type):
// then the field is a typed call, and a scalar's value is written as json.Marshal would, the
// way graphql-go writes scalars. Listing a node type is an optimisation only; an unlisted
// one, or a method of another shape, is called through reflect and written by json.Marshal.

// scalarWriter writes one scalar field of a node. It panics with planStop when the plan cannot
// answer (null in a non-null field, an unknown enum value, a number JSON cannot hold).
type scalarWriter func(node any, out *bytes.Buffer)

var scalarWriters = map[reflect.Type]func(reflect.Method, *planField) scalarWriter{
	reflect.TypeFor[*tripNode]():     typedScalar[*tripNode],
	reflect.TypeFor[*driverNode]():   typedScalar[*driverNode],
	reflect.TypeFor[*fareNode]():     typedScalar[*fareNode],
	reflect.TypeFor[*locationNode](): typedScalar[*locationNode],
	reflect.TypeFor[*positionNode](): typedScalar[*positionNode],
}

// objectCaller calls a field of object type: the node and, for a field with one ID argument,
// its value in; the object (nil for null) and the resolver's error out.
type objectCaller func(ctx context.Context, node any, id string) (any, error)

var objectCallers = map[reflect.Type]func(reflect.Method) objectCaller{
	reflect.TypeFor[*graphQLQuery](): typedObject[*graphQLQuery],
	reflect.TypeFor[*tripNode]():     typedObject[*tripNode],
}

// typedObject returns the caller of a method of N of one of the shapes the resolvers of object
// fields have; nil for any other.
func typedObject[N any](m reflect.Method) objectCaller {
	switch call := m.Func.Interface().(type) {
	case func(N, context.Context, struct{ ID idInput }) (*tripNode, error):
		return func(ctx context.Context, n any, id string) (any, error) {
			t, err := call(n.(N), ctx, struct{ ID idInput }{idInput(id)})
			return object(t), err
		}
	case func(N, context.Context, struct{ ID idInput }) (*driverNode, error):
		return func(ctx context.Context, n any, id string) (any, error) {
			d, err := call(n.(N), ctx, struct{ ID idInput }{idInput(id)})
			return object(d), err
		}
	case func(N) *driverNode:
		return func(_ context.Context, n any, _ string) (any, error) { return object(call(n.(N))), nil }
	case func(N) *fareNode:
		return func(_ context.Context, n any, _ string) (any, error) { return object(call(n.(N))), nil }
	case func(N) *locationNode:
		return func(_ context.Context, n any, _ string) (any, error) { return object(call(n.(N))), nil }
	case func(N, context.Context) *positionNode:
		return func(ctx context.Context, n any, _ string) (any, error) { return object(call(n.(N), ctx)), nil }
	}
	return nil
}

// object is a resolver's node as a plan holds it: nil for a nil pointer.
func object[T any](p *T) any {
	if p == nil {
		return nil
	}
	return p
}

// typedScalar returns the writer of a method of N without parameters whose result is one of
// the scalar shapes the resolvers use; nil for any other.
func typedScalar[N any](m reflect.Method, f *planField) scalarWriter {
	nonNull, enum := f.nonNull, f.enum
	null := func(out *bytes.Buffer) {
		if nonNull {
			panic(planStop{})
		}
		out.WriteString("null")
	}
	switch get := m.Func.Interface().(type) {
	case func(N) string:
		if f.kind == planEnum {
			return func(n any, out *bytes.Buffer) { writeEnum(out, enum, get(n.(N))) }
		}
		return func(n any, out *bytes.Buffer) { writeString(out, get(n.(N))) }
	case func(N) *string:
		return func(n any, out *bytes.Buffer) {
			if v := get(n.(N)); v == nil {
				null(out)
			} else {
				writeString(out, *v)
			}
		}
	case func(N) graphql.ID:
		return func(n any, out *bytes.Buffer) { writeID(out, get(n.(N))) }
	case func(N) int32:
		return func(n any, out *bytes.Buffer) {
			out.Write(strconv.AppendInt(out.AvailableBuffer(), int64(get(n.(N))), 10))
		}
	case func(N) *int32:
		return func(n any, out *bytes.Buffer) {
			if v := get(n.(N)); v == nil {
				null(out)
			} else {
				out.Write(strconv.AppendInt(out.AvailableBuffer(), int64(*v), 10))
			}
		}
	case func(N) float64:
		return func(n any, out *bytes.Buffer) { writeFloat(out, get(n.(N))) }
	case func(N) *float64:
		return func(n any, out *bytes.Buffer) {
			if v := get(n.(N)); v == nil {
				null(out)
			} else {
				writeFloat(out, *v)
			}
		}
	case func(N) dateTime:
		return func(n any, out *bytes.Buffer) { writeMarshaler(out, get(n.(N))) }
	case func(N) *dateTime:
		return func(n any, out *bytes.Buffer) {
			if v := get(n.(N)); v == nil {
				null(out)
			} else {
				writeMarshaler(out, *v)
			}
		}
	}
	return nil
}

// writeString writes s as json.Marshal does.
func writeString(out *bytes.Buffer, s string) { writeQuoted(out, s, s) }

// writeID writes an ID as json.Marshal does through graphql.ID's MarshalJSON.
func writeID(out *bytes.Buffer, id graphql.ID) { writeQuoted(out, string(id), id) }

// writeQuoted writes s between quotes when it holds only printable ASCII that JSON and
// json.Marshal's HTML escaping leave alone, which is what json.Marshal writes for v, the value
// s was read from; else whatever json.Marshal writes for v.
func writeQuoted(out *bytes.Buffer, s string, v any) {
	if !plainASCII(s) {
		writeJSON(out, v)
		return
	}
	out.WriteByte('"')
	out.WriteString(s)
	out.WriteByte('"')
}

// writeEnum writes an enum value as graphql-go does, quoted as it is; a value the enum does
// not have stops the plan (graphql-go reports it).
func writeEnum(out *bytes.Buffer, enum map[string]bool, name string) {
	if !enum[name] {
		panic(planStop{})
	}
	out.WriteByte('"')
	out.WriteString(name)
	out.WriteByte('"')
}

func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// writeFloat writes f as encoding/json does: the shortest representation, in exponent form
// below 1e-6 and from 1e21 on, with a two-digit exponent written without its leading zero.
func writeFloat(out *bytes.Buffer, f float64) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		panic(planStop{}) // json.Marshal fails on it; graphql-go reports the field
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b := strconv.AppendFloat(out.AvailableBuffer(), f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	out.Write(b)
}

// writeMarshaler writes what v's MarshalJSON writes, which json.Marshal would keep as it is
// (the DateTime scalar's is a quoted RFC 3339 time, nothing to compact or escape).
func writeMarshaler(out *bytes.Buffer, v json.Marshaler) {
	b, err := v.MarshalJSON()
	if err != nil {
		panic(planStop{})
	}
	out.Write(b)
}

func writeJSON(out *bytes.Buffer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(planStop{})
	}
	out.Write(b)
}
