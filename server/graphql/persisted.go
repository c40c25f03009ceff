package graphql

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/rideapi/ride/store"
)

// Automatic persisted queries (the Apollo protocol). A client sends the SHA-256 of a document
// instead of the document; on PERSISTED_QUERY_NOT_FOUND it sends both, and the server checks
// the hash, runs the document and registers it. Registrations belong to the caller's account:
// a hash another account registered is unknown to this one, so the registry tells no account
// what another ran. They live in the database, so every replica serves a hash registered
// through any of them, and in a small cache in front of it, so a known hash costs no query.

// persistedQueryTTL is how long a registration is served after it was last made. An expired
// hash is answered PERSISTED_QUERY_NOT_FOUND, and the client registers it again.
const persistedQueryTTL = 7 * 24 * time.Hour

// persistedQueryRenewEvery is how often a process writes again a registration it keeps
// receiving: the stored registration time, which every replica reads, then trails the latest
// registration by at most this.
const persistedQueryRenewEvery = time.Hour

// persistedQueryCacheMax bounds each account's part of the in-process cache. An account that
// fills its part forgets one of its own entries for each new one: no account's registrations
// can push another's out, or be seen to (documents are small and the database has them all).
const persistedQueryCacheMax = 500

// persistedQueryVersion is the only version of the protocol.
const persistedQueryVersion = 1

// persistedQueryRef is a request's extensions.persistedQuery.
type persistedQueryRef struct {
	version int
	hash    string
}

type persistedQueries struct {
	now func() time.Time

	mu    sync.RWMutex
	cache map[string]map[string]persistedEntry // by account, then by hash
}

type persistedEntry struct {
	query   string
	expires time.Time
	// renewed is when this process last wrote the registration; zero when it only read it.
	renewed time.Time
}

func newPersistedQueries(now func() time.Time) *persistedQueries {
	return &persistedQueries{now: now, cache: map[string]map[string]persistedEntry{}}
}

// hashQuery is the protocol's hash: lowercase hex SHA-256 of the document's UTF-8 text.
func hashQuery(query string) string {
	sum := sha256.Sum256([]byte(query))
	return hex.EncodeToString(sum[:])
}

func (p *persistedQueries) cached(account, hash string) (persistedEntry, bool) {
	p.mu.RLock()
	e, ok := p.cache[account][hash]
	p.mu.RUnlock()
	if !ok || p.now().After(e.expires) {
		return persistedEntry{}, false
	}
	return e, true
}

// remember caches a registration made at registered; renewed says this process wrote it.
func (p *persistedQueries) remember(account, hash, query string, registered time.Time, renewed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	own := p.cache[account]
	if own == nil {
		own = map[string]persistedEntry{}
		p.cache[account] = own
	}
	if _, known := own[hash]; !known && len(own) >= persistedQueryCacheMax {
		for h := range own { // Go's map order is random: forget one entry of the account's own
			delete(own, h)
			break
		}
	}
	e := persistedEntry{query: query, expires: registered.Add(persistedQueryTTL)}
	if renewed {
		e.renewed = registered
	}
	own[hash] = e
}

// lookup returns the document the account registered under hash; false when there is none (or
// it expired).
func (p *persistedQueries) lookup(ctx context.Context, st *store.Store, account, hash string) (string, bool, error) {
	if e, ok := p.cached(account, hash); ok {
		return e.query, true, nil
	}
	q, err := st.PersistedQueryByHash(ctx, account, hash, p.now().Add(-persistedQueryTTL))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	p.remember(account, hash, q.Query, q.CreatedAt, false)
	return q.Query, true, nil
}

// register stores (or renews) a document that ran under its hash, and purges expired
// registrations while it writes anyway. A hash this process itself wrote within
// persistedQueryRenewEvery is not written again, so a client that always sends hash and
// document costs no write per request; one this process only read is written, so that every
// registration, on any replica, moves the expiry forward.
func (p *persistedQueries) register(ctx context.Context, st *store.Store, account, hash, query string) error {
	now := p.now()
	if e, ok := p.cached(account, hash); ok && !e.renewed.IsZero() && now.Sub(e.renewed) < persistedQueryRenewEvery {
		return nil
	}
	if err := st.SavePersistedQuery(ctx, store.PersistedQuery{Account: account, Hash: hash, Query: query, CreatedAt: now}); err != nil {
		return err
	}
	p.remember(account, hash, query, now, true)
	_, err := st.DeletePersistedQueriesBefore(ctx, now.Add(-persistedQueryTTL))
	return err
}

// resolvePersistedQuery turns a request that uses the protocol into the document to run. It
// returns the document, whether it must be registered once it has run, and the request error
// that stops it.
func (h *Handler) resolvePersistedQuery(ctx context.Context, r graphQLRequest) (string, bool, *requestError) {
	ref := r.persisted
	if ref.version != persistedQueryVersion {
		return "", false, newRequestError(gqlCodeBadRequest,
			"Unsupported persisted query version %d; send version 1.", ref.version)
	}
	hash := strings.ToLower(ref.hash)
	if hash == "" {
		return "", false, newRequestError(gqlCodeBadRequest,
			"extensions.persistedQuery needs sha256Hash, the lowercase hex SHA-256 of the query.")
	}
	if r.query != "" {
		if hashQuery(r.query) != hash {
			return "", false, newRequestError(gqlCodePersistedQueryHashMismatch,
				"provided sha does not match query: sha256Hash must be the lowercase hex SHA-256 of the query's exact text.")
		}
		return r.query, true, nil
	}
	query, found, err := h.persisted.lookup(ctx, h.host.Store(ctx), h.host.Account(ctx), hash)
	if err != nil {
		// The client can always fall back to sending the document, so a store failure reads as
		// a miss; the log keeps the cause.
		h.log.ErrorContext(ctx, "persisted query lookup failed",
			slog.String("request_id", h.host.RequestID(ctx)), slog.String("error", err.Error()))
	}
	if !found {
		return "", false, newRequestError(gqlCodePersistedQueryNotFound, "PersistedQueryNotFound")
	}
	return query, false, nil
}
