package ride_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
)

// testSecret and testQuery are shared by the cursor specs, fuzz targets and
// benchmarks.
var (
	testSecret = []byte("0123456789abcdef0123456789abcdef")
	testQuery  = "/v1/trips|status=completed|sort=-created_at|caller=rdr_x"
)

// seal builds a cursor string around an arbitrary payload with a correct MAC,
// as only a holder of the secret could. It lets the specs reach the payload
// parser with hostile bytes, following the documented wire format.
func seal(secret []byte, payload []byte, query string) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(payload)
	mac.Write([]byte(query))
	raw := append(append([]byte(nil), payload...), mac.Sum(nil)[:16]...)
	return base64.RawURLEncoding.EncodeToString(raw)
}

// mutateRaw decodes a cursor, lets f change its bytes and encodes it again.
func mutateRaw(s string, f func([]byte) []byte) string {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(f(raw))
}
