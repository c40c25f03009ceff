package auth

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
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
	// accountSessions counts the sessions open on this replica per account.
	accountSessions map[string]int

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

// keySession is one stream or socket held open under a key.
type keySession struct {
	cancel context.CancelCauseFunc
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

// Why a session ends (Hold); SessionEnd tells clients.
var (
	ErrKeyRevoked = errors.New("auth: the API key was revoked")
	ErrKeyExpired = errors.New("auth: the API key expired")
)

// SessionEnd tells why a session's context ended when its key ended it: the code a stream's
// final event or a socket's close reason carries ("api_key_revoked", "api_key_expired") and a
// sentence for people. ok is false when something else ended it.
func SessionEnd(ctx context.Context) (code, detail string, ok bool) {
	return KeyEnd(context.Cause(ctx))
}

// KeyEnd is SessionEnd for an error of Check.
func KeyEnd(err error) (code, detail string, ok bool) {
	switch {
	case errors.Is(err, ErrKeyRevoked):
		return "api_key_revoked", "The API key was revoked.", true
	case errors.Is(err, ErrKeyExpired):
		return "api_key_expired", "The API key has expired.", true
	}
	return "", "", false
}

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

// used records a use at now; it writes memory only when the second changed, so that a key
// used by many requests at once does not bounce one cache line between cores.
func (e *authEntry) used(now time.Time) {
	at := now.UnixMicro()
	if at-e.lastUse.Load() >= int64(time.Second/time.Microsecond) {
		e.lastUse.Store(at)
	}
}

// refused counts an authentication failure and returns its 401.
func (a *Authenticator) refused(detail string) error {
	a.failures.WithLabelValues("refused").Inc()
	return unauthenticated(detail)
}

// Watch keeps the replica's keys in step with the store and writes the keys' last uses, until
// ctx ends. The server runs it as a background worker.
func (a *Authenticator) Watch(ctx context.Context) {
	changed := make(chan struct{}, 1)
	go a.store.FollowAPIKeyChanges(ctx, func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	ticker := time.NewTicker(revisionPollInterval)
	defer ticker.Stop()
	for {
		_, _ = a.refresh.since(ctx, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-ticker.C:
			a.forgetExpired()
			a.writeLastUses(ctx)
		}
	}
}

// forgetExpired takes the keys that have expired out of the set of keys that act: a key used
// after its expiry costs what an unknown one does, however many of them an account made.
func (a *Authenticator) forgetExpired() {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	for prefix, at := range a.expiring {
		if !now.Before(at) {
			delete(a.exists, prefix)
			delete(a.expiring, prefix)
		}
	}
}

// load brings the replica's keys up to the store's revision: all of them the first time, the
// changes since the revision it has after that.
func (a *Authenticator) load(ctx context.Context) error {
	revision, err := a.store.APIKeyRevision(ctx)
	if err != nil {
		return err
	}
	current := a.revision.Load()
	if current < 0 {
		exists, expiring := map[uint64]struct{}{}, map[uint64]time.Time{}
		err := a.store.ActiveAPIKeys(ctx, a.now(), func(keys []store.APIKeyChange) {
			for _, k := range keys {
				if prefix, ok := hexHashPrefix(k.Hash); ok {
					exists[prefix] = struct{}{}
					if k.ExpiresAt != nil {
						expiring[prefix] = *k.ExpiresAt
					}
				}
			}
		})
		if err != nil {
			return err
		}
		a.mu.Lock()
		a.exists, a.expiring = exists, expiring
		a.mu.Unlock()
		// Keys changed while the hashes were read have revisions above this one and are
		// applied by the next refresh, whatever the read saw of them.
		a.revision.Store(revision)
		return nil
	}
	if revision <= current {
		return nil
	}
	changes, err := a.store.APIKeyChangesSince(ctx, current, revision)
	if err != nil {
		return err
	}
	a.apply(changes)
	a.revision.Store(revision)
	return nil
}

// apply records created and revoked keys, and ends the sessions of the revoked ones.
func (a *Authenticator) apply(changes []store.APIKeyChange) {
	var ended []*keySession
	now := a.now()
	a.mu.Lock()
	for _, c := range changes {
		prefix, hashed := hexHashPrefix(c.Hash)
		if c.RevokedAt == nil {
			switch {
			case !hashed:
			case c.ExpiresAt == nil:
				a.exists[prefix] = struct{}{}
			case c.ExpiresAt.After(now):
				a.exists[prefix] = struct{}{}
				a.expiring[prefix] = *c.ExpiresAt
			}
			continue
		}
		if hashed {
			delete(a.exists, prefix)
			delete(a.expiring, prefix)
		}
		if e := a.byID[c.ID]; e != nil {
			e.revoked.Store(true)
		}
		for s := range a.sessions[c.ID] {
			ended = append(ended, s)
		}
		delete(a.sessions, c.ID)
	}
	a.mu.Unlock()
	for _, s := range ended {
		s.cancel(ErrKeyRevoked)
	}
}

// Sessions a key, and an account, may hold open at once on one replica: streams and sockets
// each hold a connection for as long as they last, and a replica has a few thousand.
const (
	MaxSessionsPerKey     = 100
	MaxSessionsPerAccount = 1000
)

// ErrTooManySessions refuses a session past MaxSessionsPerKey or MaxSessionsPerAccount.
var ErrTooManySessions = errors.New("auth: too many streams and sockets open")

// Hold opens a session for something that outlives its request under p's key (a stream, a
// socket): the returned context ends with cause ErrKeyRevoked when the key is revoked on any
// replica, or ErrKeyExpired when it expires. Call the returned function when the session ends.
// Past MaxSessionsPerKey or MaxSessionsPerAccount open on this replica, it refuses with a 429
// problem whose error matches ErrTooManySessions.
func (a *Authenticator) Hold(ctx context.Context, p Principal) (context.Context, context.CancelFunc, error) {
	a.mu.Lock()
	if len(a.sessions[p.KeyID]) >= MaxSessionsPerKey || a.accountSessions[p.Account] >= MaxSessionsPerAccount {
		a.mu.Unlock()
		return nil, nil, tooManySessions()
	}
	a.accountSessions[p.Account]++
	a.mu.Unlock()
	ctx, cancel := context.WithCancelCause(ctx)
	stopExpiry := func() bool { return false }
	if !p.ExpiresAt.IsZero() {
		// The deadline is on the server's clock (a.now), as the expiry checks are.
		timer := time.AfterFunc(p.ExpiresAt.Sub(a.now()), func() { cancel(ErrKeyExpired) })
		stopExpiry = timer.Stop
	}
	s := &keySession{cancel: cancel}
	a.mu.Lock()
	if a.sessions[p.KeyID] == nil {
		a.sessions[p.KeyID] = map[*keySession]struct{}{}
	}
	a.sessions[p.KeyID][s] = struct{}{}
	entry := a.byID[p.KeyID]
	a.mu.Unlock()
	// A revocation applied before the session was registered ended nothing: look again.
	if entry != nil && entry.revoked.Load() {
		cancel(ErrKeyRevoked)
	} else if entry == nil {
		if err := a.Check(ctx, p); err != nil {
			cancel(err)
		}
	}
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			a.mu.Lock()
			delete(a.sessions[p.KeyID], s)
			if len(a.sessions[p.KeyID]) == 0 {
				delete(a.sessions, p.KeyID)
			}
			if a.accountSessions[p.Account]--; a.accountSessions[p.Account] <= 0 {
				delete(a.accountSessions, p.Account)
			}
			a.mu.Unlock()
			stopExpiry()
			cancel(context.Canceled)
		})
	}, nil
}

// tooManySessions is the 429 of a session past its key's or account's bound.
func tooManySessions() error {
	p := problem.New(problem.RateLimited, fmt.Sprintf(
		"Too many streams and sockets are open: at most %d per API key and %d per account on each server. Close one, then retry.",
		MaxSessionsPerKey, MaxSessionsPerAccount))
	p.Header = http.Header{"Retry-After": {"5"}}
	p.Err = ErrTooManySessions
	return p
}

// Check reads p's key from the store and tells whether it still acts: nil, ErrKeyRevoked,
// ErrKeyExpired, or the store's error. A socket checks before each operation it starts, so
// that it never serves one under a key that no longer acts, even before the revocation
// reaches this replica.
func (a *Authenticator) Check(ctx context.Context, p Principal) error {
	key, err := a.store.APIKeyByID(ctx, p.Account, p.KeyID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return ErrKeyRevoked
	case err != nil:
		return err
	case key.RevokedAt != nil:
		return ErrKeyRevoked
	case principalOf(key).expired(a.now()):
		return ErrKeyExpired
	}
	return nil
}

// Forget marks a key revoked on this replica at once and ends its sessions here (the replica
// that revokes it; the others learn it from the key revision).
func (a *Authenticator) Forget(keyID string) {
	a.apply([]store.APIKeyChange{{ID: keyID, RevokedAt: new(time.Time)}})
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

// hashPrefix is the part of a key's hash the set of existing keys holds: 64 bits, so that a
// made-up key matches a real one by chance about once in 2^64 tries per key.
func hashPrefix(sum [sha256.Size]byte) uint64 { return binary.BigEndian.Uint64(sum[:8]) }

// hexHashPrefix is hashPrefix of a hash as the store keeps it (lowercase hex).
func hexHashPrefix(h string) (uint64, bool) {
	if len(h) < 16 {
		return 0, false
	}
	var b [8]byte
	if _, err := hex.Decode(b[:], []byte(h[:16])); err != nil {
		return 0, false
	}
	return binary.BigEndian.Uint64(b[:]), true
}

// refresher runs one refresh at a time, at most one start every refreshGap, and lets callers
// wait for one that began after a given moment.
type refresher struct {
	run func(ctx context.Context) error

	mu sync.Mutex
	// lastStart is when the latest finished refresh began; lastErr its outcome.
	lastStart time.Time
	lastErr   error
	// running is closed when the refresh under way ends; nil when none runs. runningStart is
	// when it began.
	running      chan struct{}
	runningStart time.Time
}

// since waits until a refresh that began after `after` has finished, starting one when none
// will. It reports whether that refresh succeeded; false with nil when ctx ended first is not
// possible: an ended ctx is its error. A failed refresh is an unavailable store.
func (r *refresher) since(ctx context.Context, after time.Time) (bool, error) {
	for {
		r.mu.Lock()
		if !r.lastStart.IsZero() && r.lastStart.After(after) {
			err := r.lastErr
			r.mu.Unlock()
			if err != nil {
				return false, err
			}
			return true, nil
		}
		wait := r.running
		if wait == nil {
			wait = make(chan struct{})
			r.running = wait
			go r.start(wait)
		}
		r.mu.Unlock()
		if err := awaitRefresh(ctx, wait); err != nil {
			return false, err
		}
	}
}

// awaitRefresh waits until wait closes, or ctx ends, or the bound of its database work
// passes (store.Deadline).
func awaitRefresh(ctx context.Context, wait <-chan struct{}) error {
	var expired <-chan time.Time
	if at, ok := store.Deadline(ctx); ok {
		timer := time.NewTimer(time.Until(at))
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case <-wait:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-expired:
		return context.DeadlineExceeded
	}
}

// start runs one refresh, no sooner than refreshGap after the previous one began.
func (r *refresher) start(done chan struct{}) {
	r.mu.Lock()
	gap := refreshGap - time.Since(r.lastStart)
	r.mu.Unlock()
	if gap > 0 {
		time.Sleep(gap)
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), refreshTimeout)
	err := r.run(ctx)
	cancel()
	r.mu.Lock()
	r.lastStart, r.lastErr = began, err
	r.running = nil
	r.mu.Unlock()
	close(done)
}
