package auth

import (
	"encoding/base64"
	"math/rand/v2"
	"testing"
)

// A key is plausible exactly when base64url decodes its random part (header values never
// carry the line breaks the decoder would skip) and, for a current key, its checksum matches.
func TestPlausibleKeysAreThoseTheDecoderReads(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := "ABCXYZabcxyz0189-_+/=.~ é"
	for range 20000 {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		s := string(b)
		_, err := base64.RawURLEncoding.DecodeString(s)
		if got, want := base64URL(s), err == nil; got != want {
			t.Fatalf("base64URL(%q) = %v, the decoder says %v", s, got, want)
		}
	}
	secret, _, _, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if !plausibleAPIKey(secret) {
		t.Fatalf("a new key %q is not plausible", secret)
	}
	flipped := []byte(secret)
	flipped[len(flipped)-1] ^= 1
	if plausibleAPIKey(string(flipped)) {
		t.Fatal("a key with a wrong checksum is plausible")
	}
	if !plausibleAPIKey(secret[:legacyKeyLength]) {
		t.Fatal("a key made before the checksum is not plausible")
	}
}
