package pipeline

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// decodeJSON reads a body in one pass into the value encoding/json's Decoder gives with
// UseNumber (map[string]any, []any, json.Number, string, bool, nil), which is what the
// validator checks and the handlers bind. It takes exactly the bodies checkJSON accepts and
// says no more than ok: for any other body, checkJSON says what is wrong.
//
// Every body of every write passes here. Before it, a body was read three times: walked by
// checkJSON, decoded by the validator, and decoded into a struct by the handler.
func decodeJSON(body []byte) (value any, ok bool) {
	if !utf8.Valid(body) {
		return nil, false
	}
	d := jsonDecoder{b: body}
	value, ok = d.value(0)
	if !ok {
		return nil, false
	}
	d.space()
	return value, d.i == len(body)
}

// jsonDecoder reads JSON text from b at i. Its methods return ok false at the first byte
// that checkJSON would refuse: a syntax error, a member given twice, a NUL in a string,
// nesting deeper than maxJSONDepth, or more than maxJSONMembers members or maxJSONItems items.
type jsonDecoder struct {
	b []byte
	i int
}

func (d *jsonDecoder) space() { d.i = skipJSONSpace(d.b, d.i) }

// next skips white space and reports the byte that follows, or 0 at the end.
func (d *jsonDecoder) next() byte {
	d.space()
	if d.i == len(d.b) {
		return 0
	}
	return d.b[d.i]
}

func (d *jsonDecoder) value(depth int) (any, bool) {
	if depth > maxJSONDepth {
		return nil, false
	}
	switch d.next() {
	case '{':
		return d.object(depth)
	case '[':
		return d.array(depth)
	case '"':
		return d.str()
	case 't':
		return true, d.literal("true")
	case 'f':
		return false, d.literal("false")
	case 'n':
		return nil, d.literal("null")
	}
	return d.number()
}

func (d *jsonDecoder) object(depth int) (any, bool) {
	d.i++ // {
	members := map[string]any{}
	if d.next() == '}' {
		d.i++
		return members, true
	}
	for {
		if d.next() != '"' {
			return nil, false
		}
		name, ok := d.str()
		if !ok {
			return nil, false
		}
		if _, twice := members[name]; twice {
			return nil, false
		}
		if d.next() != ':' {
			return nil, false
		}
		d.i++
		v, ok := d.value(depth + 1)
		if !ok {
			return nil, false
		}
		members[name] = v
		if len(members) > maxJSONMembers {
			return nil, false
		}
		switch d.next() {
		case ',':
			d.i++
		case '}':
			d.i++
			return members, true
		default:
			return nil, false
		}
	}
}

func (d *jsonDecoder) array(depth int) (any, bool) {
	d.i++ // [
	// encoding/json gives an empty array as an empty slice, not nil.
	items := []any{}
	if d.next() == ']' {
		d.i++
		return items, true
	}
	for {
		v, ok := d.value(depth + 1)
		if !ok {
			return nil, false
		}
		items = append(items, v)
		if len(items) > maxJSONItems {
			return nil, false
		}
		switch d.next() {
		case ',':
			d.i++
		case ']':
			d.i++
			return items, true
		default:
			return nil, false
		}
	}
}

// str reads the string at i, which opens with a quote. Text without escapes is taken as it
// is (the body is valid UTF-8); escapes are left to encoding/json, so that lone surrogates
// become U+FFFD exactly as there.
func (d *jsonDecoder) str() (string, bool) {
	start := d.i
	escaped := false
	for d.i++; d.i < len(d.b); d.i++ {
		switch c := d.b[d.i]; {
		case c == '"':
			d.i++
			if !escaped {
				return string(d.b[start+1 : d.i-1]), true
			}
			var text string
			if json.Unmarshal(d.b[start:d.i], &text) != nil || strings.IndexByte(text, 0) >= 0 {
				return "", false // an escaped NUL, or an escape encoding/json refuses
			}
			return text, true
		case c == '\\':
			escaped = true
			d.i++
			if d.i == len(d.b) {
				return "", false
			}
			switch d.b[d.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if d.i+4 >= len(d.b) {
					return "", false
				}
				for _, h := range d.b[d.i+1 : d.i+5] {
					if !isHex(h) {
						return "", false
					}
				}
				d.i += 4
			default:
				return "", false
			}
		case c < 0x20:
			return "", false // control characters, NUL among them, must be escaped
		}
	}
	return "", false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func (d *jsonDecoder) literal(word string) bool {
	if len(d.b)-d.i < len(word) || string(d.b[d.i:d.i+len(word)]) != word {
		return false
	}
	d.i += len(word)
	return true
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? as a json.Number. A number
// with a fraction or an exponent whose value is a whole number (1.0, 2e3) is given in its
// integer form: JSON Schema's integer is a value, not a spelling, so the validator accepts
// 1.0 where the document says integer, and the handler's binding into an int64 must too.
func (d *jsonDecoder) number() (any, bool) {
	start := d.i
	if d.i < len(d.b) && d.b[d.i] == '-' {
		d.i++
	}
	switch {
	case d.i < len(d.b) && d.b[d.i] == '0':
		d.i++
	case d.digits() == 0:
		return nil, false
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if d.digits() == 0 {
			return nil, false
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if d.digits() == 0 {
			return nil, false
		}
	}
	n := json.Number(d.b[start:d.i])
	if bytes.ContainsAny(d.b[start:d.i], ".eE") {
		if f, err := strconv.ParseFloat(string(n), 64); err == nil && f == math.Trunc(f) && math.Abs(f) <= maxExactInteger {
			return json.Number(strconv.FormatInt(int64(f), 10)), true
		}
	}
	return n, true
}

// maxExactInteger is the largest whole number every float64 below it holds exactly, 2^53.
const maxExactInteger = 1 << 53

// digits skips decimal digits and says how many there were.
func (d *jsonDecoder) digits() int {
	start := d.i
	for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
		d.i++
	}
	return d.i - start
}
