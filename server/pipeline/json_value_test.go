package pipeline

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
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
}

// TestDecodeJSON proves decodeJSON takes exactly what checkJSON accepts, and reads it as
// encoding/json does.
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
	if !reflect.DeepEqual(value, want) {
		t.Fatalf("%q: decodeJSON read %#v, encoding/json %#v", body, value, want)
	}
}
