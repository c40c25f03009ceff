package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rideapi/ride/server/problem"
	"github.com/rideapi/ride/store"
)

// Authenticator resolves bearer keys to principals without a database round trip per request,
// and ends what a key opened when the key stops acting.
//
//   - Every replica knows which keys act: it holds the first 64 bits of the hash of every key
//     neither revoked nor expired (a few bytes a key, at most MaxActiveAPIKeys per account),
//     loaded at start and kept current from the key
//     revision, which moves with every key created or revoked (store.APIKeyChangesSince). A key
//     outside that set is unknown without a look-up, whoever sends it and from however many
//     addresses. A key created a moment ago on another replica may not be in the set yet, so
//     an unknown key is answered only after a refresh that began after the request arrived;
//     refreshes start at most every refreshGap, so a flood of unknown keys costs the database
//     a bounded rate of cheap revision reads and never a look-up per key.
//   - Known keys are cached with their principal (at most authCacheMaxKeys; a full cache forgets
//     one entry, not all). A revocation seen in the changes marks the cached entry at once, so
//     a revoked key is refused everywhere within about revisionPollInterval (sooner on
//     PostgreSQL, which notifies every replica at commit), and within authCacheTTL even if the
//     refreshes keep failing.
//   - Streams and sockets opened under a key hold a session (Hold) that ends when the key is
//     revoked or expires.
//   - Uses are recorded in memory and written to the key's last_used_at by Watch, at most once
//     a minute per key.
type Authenticator struct {
	store *store.Store
	now   func() time.Time

	// revision is the key revision whose changes this replica has applied; -1 until the keys
	// are loaded.
	revision atomic.Int64

	mu     sync.RWMutex
	known  map[[sha256.Size]byte]*authEntry
	byID   map[string]*authEntry
	exists map[uint64]struct{} // hashPrefix of every key that acts (neither revoked nor expired)
	// expiring holds the expiry of the keys in exists that have one, so that they leave it
	// when they stop acting.
	expiring map[uint64]time.Time
	sessions map[string]map[*keySession]struct{} // by key id
	// accountSessions counts the sessions open on this replica per account, openSessions all
	// of them, at most maxSessions; opened numbers them as they open.
	accountSessions map[string]int
	openSessions    int
	maxSessions     int
	opened          uint64

	refresh refresher

	failures *prometheus.CounterVec
	lookups  prometheus.Counter
}

// authEntry is a cached key.
type authEntry struct {
	principal Principal
	revoked   atomic.Bool
	cachedAt  time.Time
	// lastUse is the latest use seen here (Unix microseconds); flushedUse the latest written.
	lastUse    atomic.Int64
	flushedUse atomic.Int64
}

const (
	authCacheTTL         = 30 * time.Second
	authCacheMaxKeys     = 10_000
	revisionPollInterval = 250 * time.Millisecond
	// refreshGap is the least time between the starts of two refreshes of the keys, however
	// many requests with unknown keys ask for one.
	refreshGap = 50 * time.Millisecond
	// refreshTimeout bounds one refresh, and so the wait of a request with an unknown key.
	refreshTimeout       = 2 * time.Second
	lastUseWriteInterval = time.Minute
)

// Metrics are the authenticator's counters.
type Metrics struct {
	// Failures counts refused keys by outcome ("refused").
	Failures *prometheus.CounterVec
	// Lookups counts reads of one key by its hash from the database.
	Lookups prometheus.Counter
}

// New is an authenticator over the store's keys.
func New(st *store.Store, now func() time.Time, m Metrics) *Authenticator {
	a := &Authenticator{
		store: st, now: now, failures: m.Failures, lookups: m.Lookups,
		known:    map[[sha256.Size]byte]*authEntry{},
		byID:     map[string]*authEntry{},
		exists:   map[uint64]struct{}{},
		expiring: map[uint64]time.Time{},
		sessions: map[string]map[*keySession]struct{}{},

		accountSessions: map[string]int{},
		maxSessions:     DefaultMaxSessions,
	}
	a.revision.Store(-1)
	a.refresh.run = a.load
	return a
}

func unauthenticated(detail string) *problem.Error {
	p := problem.New(problem.Unauthenticated, detail)
	p.Header = http.Header{"Www-Authenticate": {`Bearer realm="ride"`}}
	return p
}

// Authenticate resolves the Authorization header of a request.
func (a *Authenticator) Authenticate(ctx context.Context, header string) (Principal, error) {
	scheme, secret, found := strings.Cut(header, " ")
	if header == "" {
		return Principal{}, unauthenticated("Send an API key as Authorization: Bearer <key>.")
	}
	if !found || !strings.EqualFold(scheme, "Bearer") || secret == "" {
		return Principal{}, unauthenticated("The Authorization header must be Bearer <key>.")
	}
	secret = strings.TrimSpace(secret)
	if !plausibleAPIKey(secret) {
		return Principal{}, a.refused("The API key is unknown or revoked.")
	}
	sum := sha256.Sum256([]byte(secret))
	now := a.now()

	a.mu.RLock()
	entry := a.known[sum]
	a.mu.RUnlock()
	if entry != nil && entry.principal.expired(now) {
		return Principal{}, a.refused("The API key has expired.") // an expiry never changes
	}
	if entry == nil || now.Sub(entry.cachedAt) >= authCacheTTL {
		exists, err := a.mayExist(ctx, sum)
		if err != nil {
			return Principal{}, err
		}
		if !exists {
			return Principal{}, a.refused("The API key is unknown or revoked.")
		}
		if entry, err = a.lookup(ctx, sum, now); err != nil {
			return Principal{}, err
		}
		if entry == nil {
			return Principal{}, a.refused("The API key is unknown or revoked.")
		}
	}
	switch {
	case entry.revoked.Load():
		return Principal{}, a.refused("The API key is unknown or revoked.")
	case entry.principal.expired(now):
		return Principal{}, a.refused("The API key has expired.")
	}
	entry.used(now)
	return entry.principal, nil
}

// mayExist tells whether a key with this hash exists (or existed and is cached as revoked):
// true when the replica's set of keys has it; otherwise it waits for a refresh of the set that
// began after it was asked, and answers from that.
func (a *Authenticator) mayExist(ctx context.Context, sum [sha256.Size]byte) (bool, error) {
	asked := time.Now()
	prefix := hashPrefix(sum)
	for {
		a.mu.RLock()
		_, ok := a.exists[prefix]
		a.mu.RUnlock()
		if ok {
			return true, nil
		}
		fresh, err := a.refresh.since(ctx, asked)
		if err != nil {
			return false, err
		}
		if fresh {
			a.mu.RLock()
			_, ok = a.exists[prefix]
			a.mu.RUnlock()
			return ok, nil
		}
	}
}

// lookup reads a key from the store and caches it; nil means no such key.
func (a *Authenticator) lookup(ctx context.Context, sum [sha256.Size]byte, now time.Time) (*authEntry, error) {
	a.lookups.Inc()
	key, err := a.store.APIKeyByHash(ctx, hex.EncodeToString(sum[:])) // hashAPIKey's form
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	entry := &authEntry{principal: principalOf(key), cachedAt: now}
	entry.revoked.Store(key.RevokedAt != nil)
	if key.LastUsedAt != nil {
		entry.flushedUse.Store(key.LastUsedAt.UnixMicro())
	}
	a.mu.Lock()
	if old := a.known[sum]; old != nil {
		// Keep the uses the replaced entry saw but did not write yet.
		entry.lastUse.Store(old.lastUse.Load())
		entry.flushedUse.Store(max(entry.flushedUse.Load(), old.flushedUse.Load()))
		// A revocation applied while the store was read must not be undone by the read.
		if old.revoked.Load() {
			entry.revoked.Store(true)
		}
	} else if len(a.known) >= authCacheMaxKeys {
		for sum, e := range a.known { // Go's map order is random: forget one entry, not all
			delete(a.known, sum)
			delete(a.byID, e.principal.KeyID)
			break
		}
	}
	a.known[sum] = entry
	a.byID[entry.principal.KeyID] = entry
	a.mu.Unlock()
	return entry, nil
}

// principalOf is who a stored key speaks for.
func principalOf(key store.APIKey) Principal {
	p := Principal{KeyID: key.ID, Role: key.Role, Account: key.Account, Platform: key.Platform}
	if key.Subject != nil {
		p.Subject = *key.Subject
	}
	if key.ExpiresAt != nil {
		p.ExpiresAt = *key.ExpiresAt
	}
	return p
}

// refused counts an authentication failure and returns its 401.
func (a *Authenticator) refused(detail string) error {
	a.failures.WithLabelValues("refused").Inc()
	return unauthenticated(detail)
}
