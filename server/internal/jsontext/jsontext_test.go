package jsontext

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
)

// pieces are what strings are made of here: every ASCII byte, bytes of invalid UTF-8, and
// runes each escaping treats apart.
var pieces = func() []string {
	var p []string
	for c := range 0x80 {
		p = append(p, string(rune(c)))
	}
	return append(p, "\x80", "\xff", "\xe2\x80", "é", "€", "𝄞", "\u2028", "\u2029", "\ufffd", "\u007f", "plain text")
}()

func randomStrings(n int) []string {
	rng := rand.New(rand.NewPCG(3, 5))
	out := []string{""}
	for _, p := range pieces {
		out = append(out, p) // each piece alone
	}
	for range n {
		var sb strings.Builder
		for range rng.IntN(12) {
			sb.WriteString(pieces[rng.IntN(len(pieces))])
		}
		out = append(out, sb.String())
	}
	return out
}

func TestEncodingJSONWritesWhatJSONMarshalWrites(t *testing.T) {
	for _, s := range randomStrings(5000) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := EncodingJSON.AppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: wrote %s, json.Marshal %s", s, got, want)
		}
	}
}

func TestSlogWritesWhatSlogsJSONHandlerWrites(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == slog.LevelKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	for _, s := range randomStrings(5000) {
		buf.Reset()
		log.Info(s)
		want := strings.TrimSuffix(strings.TrimPrefix(buf.String(), `{"msg":`), "}\n")
		if got := Slog.AppendString(nil, s); string(got) != want {
			t.Fatalf("%q: wrote %s, slog %s", s, got, want)
		}
	}
}
