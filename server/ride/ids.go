package ride

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
)

// Type prefixes of identifiers. A prefix tells a human (and a log search) what
// an opaque id refers to, and lets the server reject an id of the wrong kind
// before it reaches the database.
const (
	// PrefixTrip marks trips.
	PrefixTrip = "trp"
	// PrefixDriver marks drivers.
	PrefixDriver = "drv"
	// PrefixRider marks riders.
	PrefixRider = "rdr"
	// PrefixEstimate marks fare estimates.
	PrefixEstimate = "est"
	// PrefixPayment marks payments.
	PrefixPayment = "pay"
	// PrefixReceipt marks receipts.
	PrefixReceipt = "rcp"
	// PrefixCancellation marks cancellations.
	PrefixCancellation = "can"
	// PrefixWebhookEndpoint marks webhook endpoints.
	PrefixWebhookEndpoint = "whe"
	// PrefixEvent marks events; the id doubles as the webhook-id header, so
	// consumers can deduplicate retries.
	PrefixEvent = "evt"
	// PrefixAPIKey marks API key records (the row, not the secret token).
	PrefixAPIKey = "key"
)

// idAlphabet is RFC 4648 base32 in lower case: letters and digits only, so ids
// sort the same bytewise and under PostgreSQL's "C" collation, and survive
// case-insensitive contexts such as URLs typed by hand.
const idAlphabet = "abcdefghijklmnopqrstuvwxyz234567"

// idRandomBytes is 128 bits of randomness: collisions stay negligible at any
// realistic volume and ids cannot be guessed.
const idRandomBytes = 16

// idBodyLen is the unpadded base32 length of idRandomBytes (ceil(128 / 5)).
const idBodyLen = 26

var idEncoding = base32.NewEncoding(idAlphabet).WithPadding(base32.NoPadding)

// NewID returns a fresh random identifier of the form prefix_xxxxxxxxxxxxxxxxxxxxxxxxxx.
// Ids carry no time or personal data, so they reveal nothing and can be made
// anywhere (handler, store, demo data) without coordination.
func NewID(prefix string) string {
	var raw [idRandomBytes]byte
	// crypto/rand.Read never returns an error and always fills the buffer.
	_, _ = rand.Read(raw[:])
	buf := make([]byte, len(prefix)+1+idBodyLen)
	copy(buf, prefix)
	buf[len(prefix)] = '_'
	idEncoding.Encode(buf[len(prefix)+1:], raw[:])
	return string(buf)
}

// ValidID reports whether s could have come from NewID(prefix). Checking the
// shape first lets the API answer 404 for an id of the wrong kind or length
// without a database round trip, and keeps hostile strings out of queries.
// Only the canonical encoding is accepted: the two spare bits of the last
// character must be zero, so every id has exactly one spelling.
func ValidID(prefix, s string) bool {
	if len(s) != len(prefix)+1+idBodyLen || !strings.HasPrefix(s, prefix) || s[len(prefix)] != '_' {
		return false
	}
	body := s[len(prefix)+1:]
	for i := 0; i < len(body); i++ {
		v := strings.IndexByte(idAlphabet, body[i])
		if v < 0 {
			return false
		}
		// 26 characters carry 130 bits for 128 bits of data: the last
		// character's two low bits are padding and always zero.
		if i == len(body)-1 && v&3 != 0 {
			return false
		}
	}
	return true
}
