package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Header names of a delivery. The X-Ride-* headers are Ride API's own; the lowercase ones are
// the Standard Webhooks headers, sent as well so that off-the-shelf verifiers work unchanged.
const (
	// HeaderEvent carries the event kind, e.g. trip.completed.
	HeaderEvent = "X-Ride-Event"
	// HeaderEventID carries the event id (evt_…), the same on every attempt: deduplicate on it.
	HeaderEventID = "X-Ride-Event-Id"
	// HeaderSignature is t=<unix seconds>,v1=<hex HMAC-SHA256>[,v1=…], one v1 per active secret.
	HeaderSignature = "X-Ride-Signature"
	// HeaderAttempt is the 1-based number of this delivery attempt.
	HeaderAttempt = "X-Ride-Delivery-Attempt"
	// HeaderWebhookID is the Standard Webhooks message id: the event id.
	HeaderWebhookID = "webhook-id"
	// HeaderWebhookTimestamp is the Standard Webhooks signing time in Unix seconds.
	HeaderWebhookTimestamp = "webhook-timestamp"
	// HeaderWebhookSignature is the Standard Webhooks signature list: v1,<base64> separated by spaces.
	HeaderWebhookSignature = "webhook-signature"
)

// DefaultTolerance is how far a signature's timestamp may lie from the verifier's clock, in
// either direction, when Verify is given no tolerance. It bounds the replay window of a
// captured delivery while leaving room for clock skew and slow networks.
const DefaultTolerance = 5 * time.Minute

// maxSignatures bounds the v1 entries a header may carry, so a hostile header cannot make a
// verifier compute an unbounded number of comparisons. The service sends at most two.
const maxSignatures = 16

// The verification sentinels. Verify's errors match exactly one of them with errors.Is.
var (
	// ErrMissingHeader means the request carries no signature header at all.
	ErrMissingHeader = errors.New("webhooks: missing signature header")
	// ErrMalformedHeader means the header is not t=<unix seconds>,v1=<hex>[,v1=<hex>…].
	ErrMalformedHeader = errors.New("webhooks: malformed signature header")
	// ErrTimestampTooOld means the signature is older than the tolerance: possibly a replay.
	ErrTimestampTooOld = errors.New("webhooks: signature timestamp too old")
	// ErrTimestampTooNew means the signature claims a time further in the future than the
	// tolerance allows: a clock far off, or a forged timestamp stretching the replay window.
	ErrTimestampTooNew = errors.New("webhooks: signature timestamp too far in the future")
	// ErrNoValidSignature means no v1 signature matches any of the secrets: the body was
	// altered, or it was signed with another secret.
	ErrNoValidSignature = errors.New("webhooks: no valid signature")
)

// Sign returns the X-Ride-Signature value for body signed with secret at t:
// "t=<unix seconds>,v1=<lowercase hex HMAC-SHA256(secret, "<t>.<body>")>". The key is the whole
// secret string, whsec_ prefix included. Tests of receivers use it to forge valid deliveries.
func Sign(secret string, t time.Time, body []byte) string {
	return SignAll([]string{secret}, t, body)
}

// SignAll signs body with every secret at once, one v1 entry per secret in the order given.
// During a secret rotation the service signs with the new and the old secret, so a receiver
// that still knows only one of them keeps verifying.
func SignAll(secrets []string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	var b strings.Builder
	b.Grow(len("t=") + len(ts) + len(secrets)*(len(",v1=")+2*sha256.Size))
	b.WriteString("t=")
	b.WriteString(ts)
	for _, secret := range secrets {
		b.WriteString(",v1=")
		b.WriteString(hex.EncodeToString(signature(secret, ts, body)))
	}
	return b.String()
}

// signature is HMAC-SHA256 keyed with the secret string over "<ts>.<body>".
func signature(secret, ts string, body []byte) []byte {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return mac.Sum(nil)
}

// Verify checks a delivery's X-Ride-Signature header against the raw body and the endpoint's
// secrets (pass both during a rotation). A tolerance of zero or less means DefaultTolerance.
// It returns nil or an error matching one of the Err* sentinels of this package.
//
// Verify the exact bytes received, before any JSON decoding: re-encoding changes them.
func Verify(body []byte, header string, secrets []string, tolerance time.Duration) error {
	return VerifyAt(body, header, secrets, tolerance, time.Now())
}

// VerifyAt is Verify with the verifier's clock given, for tests.
func VerifyAt(body []byte, header string, secrets []string, tolerance time.Duration, now time.Time) error {
	if strings.TrimSpace(header) == "" {
		return ErrMissingHeader
	}
	ts, signed, sigs, err := parseSignatureHeader(header)
	if err != nil {
		return err
	}
	if err := checkTimestamp(signed, now, tolerance); err != nil {
		return err
	}
	for _, secret := range secrets {
		if secret == "" {
			continue
		}
		want := signature(secret, ts, body)
		for _, sig := range sigs {
			if hmac.Equal(sig, want) {
				return nil
			}
		}
	}
	return ErrNoValidSignature
}

// checkTimestamp refuses a signing time (Unix seconds) outside now ± tolerance. It compares
// seconds, never converting the header's number to a time.Time, whose arithmetic would wrap
// around for hostile values near the int64 limits.
func checkTimestamp(signed int64, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	tol, n := int64(tolerance/time.Second), now.Unix()
	switch {
	case signed < n-tol:
		return ErrTimestampTooOld
	case signed > n+tol:
		return ErrTimestampTooNew
	}
	return nil
}

// parseSignatureHeader splits "t=…,v1=…[,v1=…]". Entries of other schemes (v0, a future v2)
// are skipped so that a new scheme can be added without breaking old verifiers; a header with
// no v1 entry, a repeated or missing t, or a v1 that is not a 64-digit hex string is malformed.
func parseSignatureHeader(header string) (ts string, signed int64, sigs [][]byte, err error) {
	malformed := func(reason string) error { return fmt.Errorf("%w: %s", ErrMalformedHeader, reason) }
	for _, part := range strings.Split(header, ",") {
		key, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return "", 0, nil, malformed("entry without '='")
		}
		switch key {
		case "t":
			if ts != "" {
				return "", 0, nil, malformed("repeated t")
			}
			sec, perr := strconv.ParseInt(value, 10, 64)
			if perr != nil {
				return "", 0, nil, malformed("t is not an integer")
			}
			ts, signed = value, sec
		case "v1":
			if len(sigs) == maxSignatures {
				return "", 0, nil, malformed("too many v1 entries")
			}
			sig, derr := hex.DecodeString(value)
			if derr != nil || len(sig) != sha256.Size {
				return "", 0, nil, malformed("v1 is not a 64-digit hex HMAC-SHA256")
			}
			sigs = append(sigs, sig)
		}
	}
	switch {
	case ts == "":
		return "", 0, nil, malformed("no t")
	case len(sigs) == 0:
		return "", 0, nil, malformed("no v1")
	}
	return ts, signed, sigs, nil
}
