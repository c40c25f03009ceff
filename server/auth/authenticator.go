package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rideapi/ride/server/problem"
	"github.com/rideapi/ride/store"
)

// Authenticator resolves bearer keys to principals without a database round trip per request.
//
//   - Known keys are cached (at most authCacheMaxKeys; a full cache forgets one entry, not all).
//     Each entry remembers the revocation revision it was read under: a revocation moves the
//     store's revision, every replica polls it every revisionPollInterval (watch), and entries
//     of an older revision are read again. So a revoked key is refused everywhere within about
//     revisionPollInterval, and within authCacheTTL even if the poll keeps failing.
//   - Unknown keys are remembered too (a bounded negative cache), and keys that cannot be ours
//     (plausibleAPIKey) are refused without a lookup.
//   - Each client address may fail authentication authFailureRate times a second (with a
//     burst of authFailureBurst); past that it is answered 429 before any lookup.
//   - Uses are recorded in memory and written to the key's last_used_at by watch, at most once
//     a minute per key.
type Authenticator struct {
	store *store.Store
	now   func() time.Time

	// revision is the latest revocation revision seen; -1 until the first poll succeeds, so
	// that nothing is trusted from the cache before then.
	revision atomic.Int64

	mu      sync.RWMutex
	known   map[[sha256.Size]byte]*authEntry
	unknown map[[sha256.Size]byte]time.Time // until when a hash is known to be no key

	failures *addressMeter
	// failuresCount counts refused keys by outcome (refused, throttled).
	failuresCount *prometheus.CounterVec
}

// authEntry is a cached key.
type authEntry struct {
	principal Principal
	revoked   bool
	expiresAt time.Time // the key's own expiry; zero means never
	revision  int64     // the revocation revision it was read under
	cachedAt  time.Time
	// lastUse is the latest use seen here (Unix microseconds); flushedUse the latest written.
	lastUse    atomic.Int64
	flushedUse atomic.Int64
}

const (
	authCacheTTL          = 30 * time.Second
	authCacheMaxKeys      = 10_000
	authNegativeTTL       = 10 * time.Minute
	revisionPollInterval  = 250 * time.Millisecond
	lastUseWriteInterval  = time.Minute
	authFailureRate       = 10 // per second and client address
	authFailureBurst      = 100
	authFailureMaxClients = 10_000
)

// New is an authenticator over the store's keys; failures counts refused keys by outcome.
func New(st *store.Store, now func() time.Time, failures *prometheus.CounterVec) *Authenticator {
	a := &Authenticator{
		store: st, now: now, failuresCount: failures,
		known:    map[[sha256.Size]byte]*authEntry{},
		unknown:  map[[sha256.Size]byte]time.Time{},
		failures: newAddressMeter(authFailureRate, authFailureBurst, authFailureMaxClients),
	}
	a.revision.Store(-1)
	return a
}

func unauthenticated(detail string) *problem.Error {
	p := problem.New(problem.Unauthenticated, detail)
	p.Header = http.Header{"Www-Authenticate": {`Bearer realm="ride"`}}
	return p
}

// Authenticate resolves the Authorization header of a request from remoteAddr.
func (a *Authenticator) Authenticate(ctx context.Context, header, remoteAddr string) (Principal, error) {
	scheme, secret, found := strings.Cut(header, " ")
	if header == "" {
		return Principal{}, unauthenticated("Send an API key as Authorization: Bearer <key>.")
	}
	if !found || !strings.EqualFold(scheme, "Bearer") || secret == "" {
		return Principal{}, unauthenticated("The Authorization header must be Bearer <key>.")
	}
	secret = strings.TrimSpace(secret)
	client := clientAddress(remoteAddr)
	if !plausibleAPIKey(secret) {
		return Principal{}, a.failed(client, "The API key is unknown or revoked.")
	}
	sum := sha256.Sum256([]byte(secret))
	now := a.now()
	revision := a.revision.Load()

	a.mu.RLock()
	entry := a.known[sum]
	unknownUntil, isUnknown := a.unknown[sum]
	a.mu.RUnlock()
	if entry == nil || entry.revision != revision || now.Sub(entry.cachedAt) >= authCacheTTL {
		if isUnknown && now.Before(unknownUntil) {
			return Principal{}, a.failed(client, "The API key is unknown or revoked.")
		}
		// An address that keeps failing gets no more lookups, except of keys it used before.
		if entry == nil && a.failures.exhausted(client, now) {
			return Principal{}, a.throttled()
		}
		var err error
		if entry, err = a.lookup(ctx, sum, revision, now); err != nil {
			return Principal{}, err
		}
		if entry == nil {
			return Principal{}, a.failed(client, "The API key is unknown or revoked.")
		}
	}
	switch {
	case entry.revoked:
		return Principal{}, a.failed(client, "The API key is unknown or revoked.")
	case !entry.expiresAt.IsZero() && !now.Before(entry.expiresAt):
		return Principal{}, a.failed(client, "The API key has expired.")
	}
	entry.used(now)
	return entry.principal, nil
}

// lookup reads a key from the store and caches the answer; nil means no such key.
func (a *Authenticator) lookup(ctx context.Context, sum [sha256.Size]byte, revision int64, now time.Time) (*authEntry, error) {
	key, err := a.store.APIKeyByHash(ctx, hex.EncodeToString(sum[:])) // hashAPIKey's form
	if errors.Is(err, store.ErrNotFound) {
		a.mu.Lock()
		evictOne(a.unknown, authCacheMaxKeys)
		a.unknown[sum] = now.Add(authNegativeTTL)
		a.mu.Unlock()
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	entry := &authEntry{
		principal: Principal{KeyID: key.ID, Role: key.Role, Account: key.Account, Subject: subjectOf(key)},
		revoked:   key.RevokedAt != nil,
		revision:  revision,
		cachedAt:  now,
	}
	if key.ExpiresAt != nil {
		entry.expiresAt = *key.ExpiresAt
	}
	if key.LastUsedAt != nil {
		entry.flushedUse.Store(key.LastUsedAt.UnixMicro())
	}
	a.mu.Lock()
	if old := a.known[sum]; old != nil {
		// Keep the uses the replaced entry saw but did not write yet.
		entry.lastUse.Store(old.lastUse.Load())
		entry.flushedUse.Store(max(entry.flushedUse.Load(), old.flushedUse.Load()))
	} else {
		evictOne(a.known, authCacheMaxKeys)
	}
	a.known[sum] = entry
	a.mu.Unlock()
	return entry, nil
}

// used records a use at now; it writes memory only when the second changed, so that a key
// used by many requests at once does not bounce one cache line between cores.
func (e *authEntry) used(now time.Time) {
	at := now.UnixMicro()
	if at-e.lastUse.Load() >= int64(time.Second/time.Microsecond) {
		e.lastUse.Store(at)
	}
}

// failed counts an authentication failure of client and returns its 401, or a 429 when the
// client has failed too often.
func (a *Authenticator) failed(client, detail string) error {
	if !a.failures.allow(client, a.now()) {
		return a.throttled()
	}
	a.failuresCount.WithLabelValues("refused").Inc()
	return unauthenticated(detail)
}

func (a *Authenticator) throttled() *problem.Error {
	a.failuresCount.WithLabelValues("throttled").Inc()
	p := problem.New(problem.RateLimited,
		"Too many requests with unknown API keys from this address. Retry later with a valid key.")
	p.Header = http.Header{"Retry-After": {"1"}}
	return p
}

// Watch keeps the cache in step with revocations and writes the keys' last uses, until ctx
// ends. The server runs it as a background worker.
func (a *Authenticator) Watch(ctx context.Context) {
	ticker := time.NewTicker(revisionPollInterval)
	defer ticker.Stop()
	for {
		a.pollRevision(ctx)
		a.writeLastUses(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// pollRevision reads the store's revocation revision; when it moved, entries read under an
// older one are stale and authenticate reads them again before trusting them. They stay in
// the cache meanwhile: a key this address used before is still one it may look up when the
// address is throttled for unknown keys.
func (a *Authenticator) pollRevision(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, revisionPollInterval)
	defer cancel()
	revision, err := a.store.APIKeyRevision(ctx)
	if err != nil || revision == a.revision.Load() {
		return
	}
	a.revision.Store(revision)
}

// writeLastUses writes the uses not yet written, at most one a minute per key.
func (a *Authenticator) writeLastUses(ctx context.Context) {
	var uses []store.APIKeyUse
	var entries []*authEntry
	a.mu.RLock()
	for _, e := range a.known {
		last, flushed := e.lastUse.Load(), e.flushedUse.Load()
		if last > flushed && (flushed == 0 || last-flushed >= lastUseWriteInterval.Microseconds()) {
			uses = append(uses, store.APIKeyUse{ID: e.principal.KeyID, At: time.UnixMicro(last)})
			entries = append(entries, e)
		}
	}
	a.mu.RUnlock()
	if len(uses) == 0 {
		return
	}
	if err := a.store.TouchAPIKeys(ctx, uses); err != nil {
		return // tried again on the next tick
	}
	for i, e := range entries {
		e.flushedUse.Store(uses[i].At.UnixMicro())
	}
}

// Forget drops a key from this replica's cache at once (the replica that revokes it).
func (a *Authenticator) Forget(keyID string) {
	a.mu.Lock()
	for sum, e := range a.known {
		if e.principal.KeyID == keyID {
			delete(a.known, sum)
		}
	}
	a.mu.Unlock()
}

// evictOne makes room for one more entry in a map bounded to limit by deleting an arbitrary
// entry (Go's map iteration order is random), instead of emptying the map.
func evictOne[K comparable, V any](m map[K]V, limit int) {
	if len(m) < limit {
		return
	}
	for k := range m {
		delete(m, k)
		return
	}
}

// addressMeter is a token bucket per client address, bounded in the addresses it tracks.
type addressMeter struct {
	limit rate.Limit
	burst int
	max   int

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

func newAddressMeter(perSecond float64, burst, maxClients int) *addressMeter {
	return &addressMeter{limit: rate.Limit(perSecond), burst: burst, max: maxClients, buckets: map[string]*rate.Limiter{}}
}

// allow takes a token of client's bucket at now, reporting whether there was one.
func (m *addressMeter) allow(client string, now time.Time) bool {
	m.mu.Lock()
	b := m.buckets[client]
	if b == nil {
		evictOne(m.buckets, m.max)
		b = rate.NewLimiter(m.limit, m.burst)
		m.buckets[client] = b
	}
	m.mu.Unlock()
	return b.AllowN(now, 1)
}

// exhausted reports whether client's bucket is empty at now, without taking a token.
func (m *addressMeter) exhausted(client string, now time.Time) bool {
	m.mu.Lock()
	b := m.buckets[client]
	m.mu.Unlock()
	return b != nil && b.TokensAt(now) < 1
}

// clientAddress is the host of a request's remote address: the peer that connected, which a
// client cannot choose the way it can choose X-Forwarded-For.
func clientAddress(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return remoteAddr
	}
	return host
}

// subjectOf is the rider or driver a key acts for; empty for admin keys.
func subjectOf(key store.APIKey) string {
	if key.Subject == nil {
		return ""
	}
	return *key.Subject
}
