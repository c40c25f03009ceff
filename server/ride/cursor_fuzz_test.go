package ride_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/rideapi/ride/server/ride"
)

// FuzzCursorDecode feeds arbitrary strings to Decode: it must never panic,
// every failure must be ErrInvalidCursor, and anything it accepts must be
// exactly what Encode produces for the result (one spelling per cursor).
func FuzzCursorDecode(f *testing.F) {
	codec := ride.NewCursorCodec(testSecret)
	for _, cur := range []ride.Cursor{
		{},
		{Backward: true, Values: []int64{-1, math.MaxInt64}, ID: "trp_abc"},
		{Values: []int64{1_700_000_000_000_000, 1850}, ID: "trp_abcdefghijklmnopqrstuvwxyz"},
	} {
		f.Add(codec.Encode(cur, testQuery))
	}
	f.Add("")
	f.Add("AAAA")
	f.Add(strings.Repeat("_", ride.MaxCursorLength))
	f.Add(seal(testSecret, []byte{1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0}, testQuery))

	f.Fuzz(func(t *testing.T, s string) {
		checkDecode(t, codec, s)
	})
}

// FuzzCursorPayload reaches the payload parser with correctly authenticated
// arbitrary bytes, which random strings almost never are: a leaked or
// mistaken secret must still not crash the server or yield a malformed cursor.
func FuzzCursorPayload(f *testing.F) {
	codec := ride.NewCursorCodec(testSecret)
	f.Add([]byte{1, 0, 0, 0})
	f.Add([]byte{1, 1, 2, 3, 4, 1, 't'})
	f.Add([]byte{1, 0, 0x80, 0x00, 0})
	f.Add([]byte{1, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 0, 0, 65})

	f.Fuzz(func(t *testing.T, payload []byte) {
		checkDecode(t, codec, seal(testSecret, payload, testQuery))
	})
}

func checkDecode(t *testing.T, codec *ride.CursorCodec, s string) {
	t.Helper()
	cur, err := codec.Decode(s, testQuery)
	if err != nil {
		if !errors.Is(err, ride.ErrInvalidCursor) {
			t.Fatalf("Decode(%q) = %v, want ErrInvalidCursor", s, err)
		}
		return
	}
	if len(cur.Values) > ride.MaxCursorValues || len(cur.ID) > ride.MaxCursorIDLength {
		t.Fatalf("Decode(%q) accepted a cursor over the limits: %+v", s, cur)
	}
	if again := codec.Encode(cur, testQuery); again != s {
		t.Fatalf("Decode(%q) accepted a non-canonical spelling of %q", s, again)
	}
}
