package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"net/http"
	"strings"
	"time"

	"github.com/rideapi/ride/server/problem"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
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

// APIKeyParams describes a key to create.
type APIKeyParams struct {
	Role string
	// Subject is the rider (of Account) or driver the key acts for; empty for admin keys.
	Subject string
	// Account is the tenant; empty means DefaultAccount.
	Account     string
	Description *string
	// ExpiresAt, when set, must be after now.
	ExpiresAt *time.Time
}

// NewAPIKey creates a key and stores only its hash. The returned secret is shown once and
// cannot be recovered. Invalid parameters are an *problem.Error naming the member at fault (422),
// which the command line prints as its detail.
func NewAPIKey(ctx context.Context, st *store.Store, p APIKeyParams, now time.Time) (string, store.APIKey, error) {
	if p.Account == "" {
		p.Account = DefaultAccount
	}
	if err := checkKeySubject(ctx, st, p); err != nil {
		return "", store.APIKey{}, err
	}
	now = now.UTC().Truncate(time.Microsecond)
	if p.ExpiresAt != nil && !p.ExpiresAt.After(now) {
		return "", store.APIKey{}, keyParamsError(problem.InvalidKeyExpiry, "body.expires_at",
			"expires_at must lie in the future.")
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", store.APIKey{}, err
	}
	random := base64.RawURLEncoding.EncodeToString(raw[:])
	secret := apiKeyPrefix + random + apiKeyChecksum(random)
	key := store.APIKey{
		ID:          ride.NewID(ride.PrefixAPIKey),
		Hash:        hashAPIKey(secret),
		Prefix:      secret[:apiKeyShownPrefix],
		Role:        p.Role,
		Account:     p.Account,
		Description: p.Description,
		CreatedAt:   now,
		ExpiresAt:   p.ExpiresAt,
	}
	if p.Subject != "" {
		key.Subject = &p.Subject
	}
	key, err := st.CreateAPIKey(ctx, store.CreateAPIKeyParams{Key: key, MaxActive: MaxActiveAPIKeys})
	if errors.Is(err, store.ErrLimitReached) {
		return "", store.APIKey{}, problem.New(problem.APIKeyLimitReached, fmt.Sprintf(
			"Account %s holds %d active API keys, the most it may. Revoke keys it no longer uses, then create this one.",
			p.Account, MaxActiveAPIKeys))
	} else if err != nil {
		return "", store.APIKey{}, err
	}
	return secret, key, nil
}

// MaxActiveAPIKeys is how many keys that are neither revoked nor expired an account may hold.
const MaxActiveAPIKeys = 1000

// checkKeySubject refuses a key that could never act: a rider or driver key needs a subject
// that exists (a rider of the key's account, any driver of the fleet), an admin key has none.
func checkKeySubject(ctx context.Context, st *store.Store, p APIKeyParams) error {
	switch p.Role {
	case RoleRider, RoleDriver:
		if p.Subject == "" {
			return keyParamsError(problem.InvalidKeySubject, "body.subject",
				fmt.Sprintf("A %s key needs a subject: the %s's id.", p.Role, p.Role))
		}
	case RoleAdmin:
		if p.Subject != "" {
			return keyParamsError(problem.InvalidKeySubject, "body.subject", "An admin key has no subject.")
		}
		return nil
	default:
		return keyParamsError(problem.InvalidRequest, "body.role",
			fmt.Sprintf("Unknown role %q: use rider, driver or admin.", p.Role))
	}
	var err error
	switch p.Role {
	case RoleRider:
		if ride.ValidID(ride.PrefixRider, p.Subject) {
			_, err = st.RiderOfAccount(ctx, p.Account, p.Subject)
		} else {
			err = store.ErrNotFound
		}
	case RoleDriver:
		// Drivers are the platform's fleet: a key that acts for one is the platform's to give.
		platform, perr := st.IsPlatformAccount(ctx, p.Account)
		if perr != nil {
			return perr
		}
		if !platform {
			return problem.New(problem.Forbidden, "Only the platform's admins create driver keys: "+
				"drivers are the platform's shared fleet, not an account's.")
		}
		if ride.ValidID(ride.PrefixDriver, p.Subject) {
			_, err = st.DriverByID(ctx, p.Subject)
		} else {
			err = store.ErrNotFound
		}
	}
	if errors.Is(err, store.ErrNotFound) {
		where := "of account " + p.Account
		if p.Role == RoleDriver {
			where = "of the fleet"
		}
		return keyParamsError(problem.InvalidKeySubject, "body.subject",
			fmt.Sprintf("No %s %s has the id %s.", p.Role, where, problem.TruncateID(p.Subject)))
	}
	return err
}

func keyParamsError(code, location, detail string) *problem.Error {
	return &problem.Error{Status: http.StatusUnprocessableEntity, Code: code, Detail: detail,
		Fields: []problem.FieldError{{Location: location, Message: detail}}}
}

// apiKeyChecksum is the checksum part of a key: the CRC-32 of its random part, base64url.
func apiKeyChecksum(random string) string {
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc32.ChecksumIEEE([]byte(random)))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// plausibleAPIKey reports whether secret could be one of our keys: the right prefix and
// length, and for current keys a checksum that matches. Only plausible keys are looked up.
func plausibleAPIKey(secret string) bool {
	if !strings.HasPrefix(secret, apiKeyPrefix) {
		return false
	}
	switch len(secret) {
	case legacyKeyLength:
		_, err := base64.RawURLEncoding.DecodeString(secret[len(apiKeyPrefix):])
		return err == nil
	case apiKeyLength:
		random := secret[len(apiKeyPrefix) : len(apiKeyPrefix)+apiKeyRandomLength]
		if _, err := base64.RawURLEncoding.DecodeString(random); err != nil {
			return false
		}
		return secret[len(apiKeyPrefix)+apiKeyRandomLength:] == apiKeyChecksum(random)
	}
	return false
}

// hashAPIKey is SHA-256: keys carry 256 random bits, so a slow password hash buys nothing and
// would cost every request.
func hashAPIKey(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}
