package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// Roles a key can have; the store defines them because its schema checks them.
const (
	RoleRider  = store.RoleRider
	RoleDriver = store.RoleDriver
	RoleAdmin  = store.RoleAdmin
)

// DefaultAccount is the account of keys created without one; the demo keys belong to it.
const DefaultAccount = "acct_default"

// Principal is who an API key speaks for.
type Principal struct {
	KeyID   string
	Role    string
	Subject string // the rider's or driver's id; empty for admin
	Account string
}

// IsAdmin reports whether the principal may do everything.
func (p Principal) IsAdmin() bool { return p.Role == RoleAdmin }

// Is reports whether the principal is the given rider or driver.
func (p Principal) Is(role, subject string) bool { return p.Role == role && p.Subject == subject }

type principalKey struct{}

func withPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// principalFrom returns the authenticated caller; the gate guarantees one on secured operations.
func principalFrom(ctx context.Context) Principal {
	p, _ := ctx.Value(principalKey{}).(Principal)
	return p
}

// apiKeyPrefix marks our keys so that secret scanners and humans recognise them.
const apiKeyPrefix = "rk_"

// NewAPIKey creates a key for a principal and stores only its hash. The returned secret is
// shown once and cannot be recovered.
func NewAPIKey(ctx context.Context, st *store.Store, role, subject, account string, now time.Time) (string, error) {
	switch role {
	case RoleRider, RoleDriver:
		if subject == "" {
			return "", fmt.Errorf("a %s key needs --subject (the %s's id)", role, role)
		}
	case RoleAdmin:
		if subject != "" {
			return "", errors.New("an admin key has no subject")
		}
	default:
		return "", fmt.Errorf("unknown role %q: use rider, driver or admin", role)
	}
	if account == "" {
		account = DefaultAccount
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	secret := apiKeyPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	key := store.APIKey{
		ID:        ride.NewID(ride.PrefixAPIKey),
		Hash:      hashAPIKey(secret),
		Role:      role,
		Account:   account,
		CreatedAt: now.UTC().Truncate(time.Microsecond),
	}
	if subject != "" {
		key.Subject = &subject
	}
	if err := st.CreateAPIKey(ctx, key); err != nil {
		return "", err
	}
	return secret, nil
}

// hashAPIKey is SHA-256: keys carry 256 random bits, so a slow password hash buys nothing and
// would cost every request.
func hashAPIKey(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// authenticator resolves bearer keys to principals. It caches answers briefly so that a request
// does not cost a database round trip; a revoked key stops working within authCacheTTL.
type authenticator struct {
	store *store.Store
	now   func() time.Time

	mu sync.RWMutex
	// cache is keyed by the SHA-256 of the secret, as bytes: a lookup needs no hex string.
	cache map[[sha256.Size]byte]authEntry
}

type authEntry struct {
	principal Principal
	ok        bool
	expires   time.Time
}

const (
	authCacheTTL     = 30 * time.Second
	authCacheMaxKeys = 10_000
)

func newAuthenticator(st *store.Store, now func() time.Time) *authenticator {
	return &authenticator{store: st, now: now, cache: map[[sha256.Size]byte]authEntry{}}
}

func unauthenticated(detail string) *APIError {
	p := newAPIError(http.StatusUnauthorized, codeUnauthenticated, detail)
	p.Header = http.Header{"Www-Authenticate": {`Bearer realm="ride"`}}
	return p
}

func (a *authenticator) authenticate(ctx context.Context, header string) (Principal, error) {
	scheme, secret, found := strings.Cut(header, " ")
	if header == "" {
		return Principal{}, unauthenticated("Send an API key as Authorization: Bearer <key>.")
	}
	if !found || !strings.EqualFold(scheme, "Bearer") || secret == "" {
		return Principal{}, unauthenticated("The Authorization header must be Bearer <key>.")
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(secret)))
	now := a.now()

	a.mu.RLock()
	entry, cached := a.cache[sum]
	a.mu.RUnlock()
	if !cached || now.After(entry.expires) {
		key, err := a.store.APIKeyByHash(ctx, hex.EncodeToString(sum[:])) // hashAPIKey's form
		switch {
		case errors.Is(err, store.ErrNotFound):
			entry = authEntry{}
		case err != nil:
			return Principal{}, err
		default:
			entry = authEntry{ok: key.RevokedAt == nil, principal: Principal{
				KeyID: key.ID, Role: key.Role, Account: key.Account, Subject: deref(key.Subject),
			}}
		}
		entry.expires = now.Add(authCacheTTL)
		a.mu.Lock()
		if len(a.cache) >= authCacheMaxKeys {
			a.cache = map[[sha256.Size]byte]authEntry{}
		}
		a.cache[sum] = entry
		a.mu.Unlock()
	}
	if !entry.ok {
		return Principal{}, unauthenticated("The API key is unknown or revoked.")
	}
	return entry.principal, nil
}

func forbidden(detail string) *APIError {
	return newAPIError(http.StatusForbidden, codeForbidden, detail)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
