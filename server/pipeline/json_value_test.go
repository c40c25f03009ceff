package pipeline

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/rideapi/ride/server/problem"
)

// jsonBodies are bodies at the edges of what checkJSON accepts.
var jsonBodies = []string{
	`{}`, `[]`, `""`, `0`, `-0`, `1.5e+10`, `-12.25E-3`, `true`, `false`, `null`, ` {"a" : [ 1 , 2 ] } `,
	`{"positions":[{"lat":37.7793,"lng":-122.4192,"heading":90,"speed":8.5,"recorded_at":"2026-11-24T18:00:00Z"}]}`,
	`{"a":{"b":{"c":[[],{},"x"]}}}`, `{"é":"ü","\u00e9x":"\ud83d\ude00","s":"a\"b\\c\/d\b\f\n\r\t"}`,
	`{"lone":"\ud800"}`, `{"A":1,"a":2}`, `{"a":"\u0041"}`, "\t\r\n[1]\n",
	// refused
	``, ` `, `{`, `}`, `[1,]`, `{"a":1,}`, `{,"a":1}`, `{"a" 1}`, `{"a":1 "b":2}`, `[1 2]`, `01`, `1.`, `.5`, `1e`,
	`-`, `+1`, `NaN`, `tru`, `nul`, `"abc`, `"a\qb"`, `"\u12"`, `"\u12G4"`, "\"a\x01b\"", "\"a\x00b\"", `"a\u0000b"`,
	`{"a\u0000":1}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{} {}`, `1 2`, `{}x`, "\"\xff\"", `{"a":[1,{"a":1,"a":2}]}`,
	strings.Repeat("[", 64) + strings.Repeat("]", 64), strings.Repeat("[", 65) + strings.Repeat("]", 65),
	strings.Repeat(`{"a":`, 65) + "1" + strings.Repeat("}", 65),
	members(maxJSONMembers), members(maxJSONMembers + 1), "[" + strings.Repeat("0,", maxJSONItems-1) + "0]",
	`{"a":[` + strings.Repeat("0,", maxJSONItems) + "0]}",
}

// members is an object of n members.
func members(n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"m` + strconv.Itoa(i) + `":0`)
	}
	return b.String() + "}"
}

// TestJSONSizeBounds: an object of more than maxJSONMembers members or an array of more than
// maxJSONItems items is refused before validation, naming where it is.
func TestJSONSizeBounds(t *testing.T) {
	for body, want := range map[string]string{
		members(maxJSONMembers + 1):                                 "body",
		`{"a":{"b":[` + strings.Repeat("0,", maxJSONItems) + "0]}}": "body.a.b",
	} {
		if _, ok := decodeJSON([]byte(body)); ok {
			t.Errorf("%.40s…: decoded", body)
		}
		err := checkJSON([]byte(body))
		p, ok := err.(*problem.Error)
		if !ok || p.Code != problem.InvalidRequest || len(p.Fields) != 1 || p.Fields[0].Location != want {
			t.Errorf("%.40s…: checkJSON said %v, want invalid_request at %s", body, err, want)
		}
	}
	for _, body := range []string{members(maxJSONMembers), "[" + strings.Repeat("0,", maxJSONItems-1) + "0]"} {
		if _, ok := decodeJSON([]byte(body)); !ok {
			t.Errorf("%.40s…: refused at the bound", body)
		}
	}
}

// TestDecodeJSON proves decodeJSON takes exactly what checkJSON accepts, and reads it as
// encoding/json does, except that a whole number is spelled as an integer.
func TestDecodeJSON(t *testing.T) {
	for _, body := range jsonBodies {
		agreesWithEncodingJSON(t, []byte(body))
	}
}

func FuzzDecodeJSON(f *testing.F) {
	for _, body := range jsonBodies {
		f.Add([]byte(body))
	}
	f.Fuzz(agreesWithEncodingJSON)
}

func agreesWithEncodingJSON(t *testing.T, body []byte) {
	value, ok := decodeJSON(body)
	checked := checkJSON(body)
	if ok != (checked == nil) {
		t.Fatalf("%q: decodeJSON ok %v, checkJSON %v", body, ok, checked)
	}
	if !ok {
		return
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var want any
	if err := dec.Decode(&want); err != nil {
		t.Fatalf("%q: accepted, but encoding/json says %v", body, err)
	}
	if !sameJSON(value, want) {
		t.Fatalf("%q: decodeJSON read %#v, encoding/json %#v", body, value, want)
	}
}

// sameJSON compares decoded values; a number may be spelled differently when its value is a
// whole number, which decodeJSON writes as an integer.
func sameJSON(got, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for k, v := range w {
			if !sameJSON(g[k], v) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !sameJSON(g[i], w[i]) {
				return false
			}
		}
		return true
	case json.Number:
		g, ok := got.(json.Number)
		if !ok {
			return false
		}
		if g == w {
			return true
		}
		gf, gerr := strconv.ParseFloat(string(g), 64)
		wf, werr := strconv.ParseFloat(string(w), 64)
		return gerr == nil && werr == nil && gf == wf && gf == math.Trunc(gf) && !strings.ContainsAny(string(g), ".eE")
	}
	return reflect.DeepEqual(got, want)
}

// TestDecodeJSONWholeNumbers: a whole number reads as an integer however it is spelled, so
// that an integer member of the document binds to an int64; others keep their spelling.
func TestDecodeJSONWholeNumbers(t *testing.T) {
	for body, want := range map[string]json.Number{
		`1.0`: "1", `1850.000`: "1850", `2e3`: "2000", `-0.0`: "0", `1.5e1`: "15", `9007199254740992.0`: "9007199254740992",
		`1.5`: "1.5", `1e-3`: "1e-3", `1e400`: "1e400", `18446744073709551616.0`: "18446744073709551616.0", `7`: "7",
	} {
		got, ok := decodeJSON([]byte(body))
		if !ok || got != want {
			t.Errorf("%s: decodeJSON read %#v, want %q", body, got, want)
		}
	}
}
