package auth

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"sync"
	"time"

	"github.com/rideapi/ride/store"
)

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
