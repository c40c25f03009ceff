package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"strings"
)

// Key secrets are apiKeyPrefix, 32 random bytes in unpadded base64url (43 characters) and a
// checksum of those 43 characters (CRC-32, 6 characters), as GitHub's tokens carry one: a
// mistyped or made-up key is refused without a database round trip, and secret scanners can
// tell a real key from noise. Keys made before the checksum (legacyKeyLength) still work.
const (
	apiKeyPrefix        = "rk_"
	apiKeyRandomLength  = 43
	apiKeyChecksumChars = 6
	apiKeyLength        = len(apiKeyPrefix) + apiKeyRandomLength + apiKeyChecksumChars
	legacyKeyLength     = len(apiKeyPrefix) + apiKeyRandomLength
	// apiKeyShownPrefix is how much of a secret the key's views show to tell keys apart.
	apiKeyShownPrefix = len(apiKeyPrefix) + 8
)

// NewSecret makes a key's secret: apiKeyPrefix, 32 random bytes and their checksum. It returns
// the secret, which is shown once and never stored, its hash, which is stored, and the start
// of it that the key's views show to tell keys apart.
func NewSecret() (secret, hash, shown string, err error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", "", "", err
	}
	random := base64.RawURLEncoding.EncodeToString(raw[:])
	secret = apiKeyPrefix + random + apiKeyChecksum(random)
	return secret, hashAPIKey(secret), secret[:apiKeyShownPrefix], nil
}

// apiKeyChecksum is the checksum part of a key: the CRC-32 of its random part, base64url.
func apiKeyChecksum(random string) string {
	sum := checksumOf(random)
	return string(sum[:])
}

// checksumOf is apiKeyChecksum without its allocation, for comparisons.
func checksumOf(random string) [apiKeyChecksumChars]byte {
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc32.ChecksumIEEE([]byte(random)))
	var text [apiKeyChecksumChars]byte
	base64.RawURLEncoding.Encode(text[:], sum[:])
	return text
}

// base64URL reports whether s is unpadded base64url, as base64.RawURLEncoding decodes it,
// without the decoded bytes.
func base64URL(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return len(s)%4 != 1
}

// plausibleAPIKey reports whether secret could be one of our keys: the right prefix and
// length, and for current keys a checksum that matches. Only plausible keys are looked up.
func plausibleAPIKey(secret string) bool {
	if !strings.HasPrefix(secret, apiKeyPrefix) {
		return false
	}
	switch len(secret) {
	case legacyKeyLength:
		return base64URL(secret[len(apiKeyPrefix):])
	case apiKeyLength:
		random := secret[len(apiKeyPrefix) : len(apiKeyPrefix)+apiKeyRandomLength]
		if !base64URL(random) {
			return false
		}
		sum := checksumOf(random)
		return secret[len(apiKeyPrefix)+apiKeyRandomLength:] == string(sum[:])
	}
	return false
}

// hashAPIKey is SHA-256: keys carry 256 random bits, so a slow password hash buys nothing and
// would cost every request.
func hashAPIKey(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}
