package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/rideapi/ride/server/problem"
	"github.com/rideapi/ride/store"
)

// keySession is one stream or socket held open under a key.
type keySession struct {
	cancel context.CancelCauseFunc
}

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

// Sessions a key, and an account, may hold open at once on one replica: streams and sockets
// each hold a connection for as long as they last, and a replica has a few thousand.
const (
	MaxSessionsPerKey     = 100
	MaxSessionsPerAccount = 1000
)

// DefaultMaxSessions is how many sessions one replica holds open at once, all accounts
// together (LimitSessions): half the 4,096 connections a process accepts, so that however many
// accounts open streams and sockets, requests keep the other half.
const DefaultMaxSessions = 2048

// ErrTooManySessions refuses a session past MaxSessionsPerKey or MaxSessionsPerAccount.
var ErrTooManySessions = errors.New("auth: too many streams and sockets open")

// ErrReplicaFull refuses a session past the replica's own bound (LimitSessions): not the
// caller's doing, so a 503; another replica, or this one a little later, takes it.
var ErrReplicaFull = errors.New("auth: the server holds as many streams and sockets as it may")

// LimitSessions sets how many sessions the replica holds open at once, all accounts together;
// zero or less means DefaultMaxSessions. Call it before the first Hold.
func (a *Authenticator) LimitSessions(n int) {
	if n <= 0 {
		n = DefaultMaxSessions
	}
	a.maxSessions = n
}

// Hold opens a session for something that outlives its request under p's key (a stream, a
// socket): the returned context ends with cause ErrKeyRevoked when the key is revoked on any
// replica, or ErrKeyExpired when it expires. Call the returned function when the session ends.
// Past MaxSessionsPerKey or MaxSessionsPerAccount open on this replica, it refuses with a 429
// problem whose error matches ErrTooManySessions; past the replica's own bound (LimitSessions),
// with a 503 problem whose error matches ErrReplicaFull.
func (a *Authenticator) Hold(ctx context.Context, p Principal) (context.Context, context.CancelFunc, error) {
	a.mu.Lock()
	switch {
	case len(a.sessions[p.KeyID]) >= MaxSessionsPerKey || a.accountSessions[p.Account] >= MaxSessionsPerAccount:
		a.mu.Unlock()
		return nil, nil, tooManySessions()
	case a.openSessions >= a.maxSessions:
		a.mu.Unlock()
		return nil, nil, replicaFull()
	}
	a.accountSessions[p.Account]++
	a.openSessions++
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
			a.openSessions--
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

// replicaFull is the 503 of a session past the replica's bound.
func replicaFull() error {
	p := problem.New(problem.Unavailable,
		"This server holds as many streams and sockets as it may. Retry in a few seconds: another server, or this one once a stream has closed, takes it.")
	p.Header = http.Header{"Retry-After": {"5"}}
	p.Err = ErrReplicaFull
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
