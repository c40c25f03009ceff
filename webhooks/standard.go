package webhooks

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// SecretPrefix starts every endpoint secret, as in Standard Webhooks, so that secret scanners
// and humans recognise one.
const SecretPrefix = "whsec_"

// secretBytes is the randomness of a new secret: 256 bits, the HMAC-SHA256 key size.
const secretBytes = 32

// ErrInvalidSecret means a secret is not whsec_ followed by standard base64, so it cannot key
// a Standard Webhooks signature (X-Ride-Signature accepts any string).
var ErrInvalidSecret = errors.New("webhooks: secret is not whsec_<base64>")

// NewSecret returns a fresh endpoint secret: "whsec_" and the standard base64 of 32 random bytes.
func NewSecret() string {
	var raw [secretBytes]byte
	// crypto/rand.Read never fails and always fills the buffer.
	_, _ = rand.Read(raw[:])
	return SecretPrefix + base64.StdEncoding.EncodeToString(raw[:])
}

// standardKey is the Standard Webhooks HMAC key of a secret: the bytes its base64 part decodes to.
func standardKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil || len(key) == 0 {
		return nil, ErrInvalidSecret
	}
	return key, nil
}

// SignStandard returns the Standard Webhooks webhook-signature value for one message,
// "v1,<base64 HMAC-SHA256(key, "<id>.<unix seconds>.<body>")>" for each secret, separated by
// spaces; the key is the base64-decoded part of the secret after whsec_.
func SignStandard(secrets []string, id string, t time.Time, body []byte) (string, error) {
	ts := strconv.FormatInt(t.Unix(), 10)
	sigs := make([]string, 0, len(secrets))
	for _, secret := range secrets {
		key, err := standardKey(secret)
		if err != nil {
			return "", err
		}
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(standardSignature(key, id, ts, body)))
	}
	return strings.Join(sigs, " "), nil
}

func standardSignature(key []byte, id, ts string, body []byte) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return mac.Sum(nil)
}

// VerifyStandard checks the Standard Webhooks headers of a delivery (webhook-id,
// webhook-timestamp, webhook-signature) against the raw body and the endpoint's secrets, with
// the same tolerance rule and sentinels as Verify.
func VerifyStandard(body []byte, header http.Header, secrets []string, tolerance time.Duration) error {
	return VerifyStandardAt(body, header, secrets, tolerance, time.Now())
}

// VerifyStandardAt is VerifyStandard with the verifier's clock given, for tests.
func VerifyStandardAt(body []byte, header http.Header, secrets []string, tolerance time.Duration, now time.Time) error {
	id, ts, list := header.Get(HeaderWebhookID), header.Get(HeaderWebhookTimestamp), header.Get(HeaderWebhookSignature)
	if id == "" || ts == "" || list == "" {
		return ErrMissingHeader
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: webhook-timestamp is not an integer", ErrMalformedHeader)
	}
	var sigs [][]byte
	for _, entry := range strings.Fields(list) {
		version, value, ok := strings.Cut(entry, ",")
		if !ok {
			return fmt.Errorf("%w: webhook-signature entry without ','", ErrMalformedHeader)
		}
		if version != "v1" {
			continue
		}
		if len(sigs) == maxSignatures {
			return fmt.Errorf("%w: too many v1 entries", ErrMalformedHeader)
		}
		sig, err := base64.StdEncoding.DecodeString(value)
		if err != nil || len(sig) != sha256.Size {
			return fmt.Errorf("%w: v1 is not a base64 HMAC-SHA256", ErrMalformedHeader)
		}
		sigs = append(sigs, sig)
	}
	if len(sigs) == 0 {
		return fmt.Errorf("%w: no v1 signature", ErrMalformedHeader)
	}
	if err := checkTimestamp(sec, now, tolerance); err != nil {
		return err
	}
	for _, secret := range secrets {
		key, err := standardKey(secret)
		if err != nil {
			continue
		}
		want := standardSignature(key, id, ts, body)
		for _, sig := range sigs {
			if hmac.Equal(sig, want) {
				return nil
			}
		}
	}
	return ErrNoValidSignature
}

// Headers returns every header of one delivery attempt of an event, signed at t with each of
// the endpoint's active secrets: Content-Type, the X-Ride-* headers and the Standard Webhooks
// headers. The service signs afresh on every attempt, so the timestamp is always recent.
func Headers(eventID, eventType string, attempt int, t time.Time, body []byte, secrets []string) (http.Header, error) {
	standard, err := SignStandard(secrets, eventID, t, body)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "RideAPI-Webhooks/1.0")
	h.Set(HeaderEvent, eventType)
	h.Set(HeaderEventID, eventID)
	h.Set(HeaderSignature, SignAll(secrets, t, body))
	h.Set(HeaderAttempt, strconv.Itoa(attempt))
	// HTTP header names are case-insensitive: Go sends these as Webhook-Id and so on, and
	// every Standard Webhooks library reads them whatever their case.
	h.Set(HeaderWebhookID, eventID)
	h.Set(HeaderWebhookTimestamp, strconv.FormatInt(t.Unix(), 10))
	h.Set(HeaderWebhookSignature, standard)
	return h, nil
}
