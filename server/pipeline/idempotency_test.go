package pipeline

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rideapi/ride/server/auth"
)

// TestRequestFingerprint pins what makes two requests "the same" for an Idempotency-Key: the
// HTTP routes other than /v1/payments live on other branches, so the route part is proved here.
func TestRequestFingerprint(t *testing.T) {
	rider := auth.Principal{Role: auth.RoleRider, Subject: "rdr_a", Account: auth.DefaultAccount}
	request := func(method, path, body string) *http.Request {
		return httptest.NewRequest(method, path, strings.NewReader(body))
	}
	fingerprint := func(req *http.Request, route string, caller auth.Principal) string {
		t.Helper()
		fp, err := requestFingerprint(req, route, caller)
		if err != nil {
			t.Fatal(err)
		}
		return fp
	}
	body := `{"trip_id":"trp_1","amount":2358,"currency":"usd","payment_method":"pm_card_visa"}`
	base := fingerprint(request("POST", "/v1/payments", body), "/v1/payments", rider)

	same := map[string]string{
		"the same request": fingerprint(request("POST", "/v1/payments", body), "/v1/payments", rider),
		"members reordered and spaced": fingerprint(request("POST", "/v1/payments",
			"{ \"payment_method\": \"pm_card_visa\",\n \"currency\": \"usd\", \"amount\": 2358, \"trip_id\": \"trp_1\" }"),
			"/v1/payments", rider),
		"the gate's validated value": fingerprint(func() *http.Request {
			req := request("POST", "/v1/payments", "")
			req.Body = validatedBody{ReadCloser: io.NopCloser(strings.NewReader(body)), value: map[string]any{
				"payment_method": "pm_card_visa", "currency": "usd", "amount": float64(2358), "trip_id": "trp_1"}}
			return req
		}(), "/v1/payments", rider),
		"another key of the same rider": fingerprint(request("POST", "/v1/payments", body), "/v1/payments",
			auth.Principal{Role: auth.RoleRider, Subject: "rdr_a", Account: auth.DefaultAccount, KeyID: "key_other"}),
	}
	for name, fp := range same {
		if fp != base {
			t.Errorf("%s: fingerprint differs, want the same", name)
		}
	}

	different := map[string]string{
		"another body":  fingerprint(request("POST", "/v1/payments", strings.Replace(body, "2358", "2359", 1)), "/v1/payments", rider),
		"another route": fingerprint(request("POST", "/v1/fare-estimates", body), "/v1/fare-estimates", rider),
		"another path of the same route": fingerprint(request("POST", "/v1/trips/trp_2/cancellations", body),
			"/v1/trips/{tripId}/cancellations", rider),
		"the same path under another route": fingerprint(request("POST", "/v1/payments", body), "/v1/{other}", rider),
		"another method":                    fingerprint(request("PUT", "/v1/payments", body), "/v1/payments", rider),
		"a query string":                    fingerprint(request("POST", "/v1/payments?x=1", body), "/v1/payments", rider),
		"another rider":                     fingerprint(request("POST", "/v1/payments", body), "/v1/payments", auth.Principal{Role: auth.RoleRider, Subject: "rdr_b"}),
		"an admin":                          fingerprint(request("POST", "/v1/payments", body), "/v1/payments", auth.Principal{Role: auth.RoleAdmin}),
		"no body":                           fingerprint(request("POST", "/v1/payments", ""), "/v1/payments", rider),
	}
	seen := map[string]string{base: "base"}
	for name, fp := range different {
		if other, dup := seen[fp]; dup {
			t.Errorf("%s: fingerprint equals that of %s", name, other)
		}
		seen[fp] = name
	}
}

// TestCanonicalBodyKeepsTheBodyReadable: fingerprinting must not consume what the handler reads.
func TestCanonicalBodyKeepsTheBodyReadable(t *testing.T) {
	req := httptest.NewRequest("POST", "/v1/payments", strings.NewReader(`{"b": 1, "a": [true, null]}`))
	canonical, err := canonicalBody(req)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(canonical), `{"a":[true,null],"b":1}`; got != want {
		t.Errorf("canonical body %s, want %s", got, want)
	}
	rest, _ := io.ReadAll(req.Body)
	if string(rest) != `{"b": 1, "a": [true, null]}` {
		t.Errorf("body left for the handler: %q", rest)
	}
	notJSON := httptest.NewRequest("POST", "/v1/payments", strings.NewReader("not json"))
	if canonical, _ := canonicalBody(notJSON); string(canonical) != "not json" {
		t.Errorf("a body that is not JSON counts as its bytes, got %q", canonical)
	}
}

func TestValidIdempotencyKey(t *testing.T) {
	for key, want := range map[string]bool{
		"5f0c6e1e-8d1e-4b7a-9c1f-3d2e4a6b8c0d": true,
		"a":                                    true,
		strings.Repeat("k", 255):               true,
		"":                                     false,
		strings.Repeat("k", 256):               false,
		"has space":                            false,
		"tab\t":                                false,
		"é":                                    false,
	} {
		if got := validIdempotencyKey(key); got != want {
			t.Errorf("validIdempotencyKey(%q) = %v, want %v", key, got, want)
		}
	}
}
