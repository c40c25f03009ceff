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
	cancel  context.CancelCauseFunc
	account string
	opened  uint64 // the order sessions were opened in on this replica
	// counted is whether the session counts against its account and the replica, until it is
	// released or gives way (Hold). Guarded by Authenticator.mu.
	counted bool
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

// ErrReplicaFull refuses a session past the replica's own bound (LimitSessions) to an account
// that holds at least as many as any other there: a 503, as another replica may take it.
var ErrReplicaFull = errors.New("auth: the server holds as many streams and sockets as it may")

// ErrGaveWay ends the newest session of the account holding the most on a full replica, so
// that an account holding fewer may open one (Hold).
var ErrGaveWay = errors.New("auth: the session gave way to another account's on a full server")

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
// problem whose error matches ErrTooManySessions.
//
// The replica's own bound (LimitSessions) never refuses an account because others hold many:
// on a full replica, the newest session of the account holding the most ends (cause
// ErrGaveWay) to make room, as long as that account still holds more than p's afterwards.
// Otherwise p's account holds as many as any, and it is refused with a 503 problem whose error
// matches ErrReplicaFull.
func (a *Authenticator) Hold(ctx context.Context, p Principal) (context.Context, context.CancelFunc, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	s := &keySession{cancel: cancel, account: p.Account, counted: true}
	var gaveWay *keySession
	a.mu.Lock()
	switch {
	case len(a.sessions[p.KeyID]) >= MaxSessionsPerKey || a.accountSessions[p.Account] >= MaxSessionsPerAccount:
		a.mu.Unlock()
		cancel(ErrTooManySessions)
		return nil, nil, tooManySessions()
	case a.openSessions >= a.maxSessions:
		if gaveWay = a.giveWay(p.Account); gaveWay == nil {
			a.mu.Unlock()
			cancel(ErrReplicaFull)
			return nil, nil, replicaFull()
		}
	}
	a.accountSessions[p.Account]++
	a.openSessions++
	a.opened++
	s.opened = a.opened
	if a.sessions[p.KeyID] == nil {
		a.sessions[p.KeyID] = map[*keySession]struct{}{}
	}
	a.sessions[p.KeyID][s] = struct{}{}
	entry := a.byID[p.KeyID]
	a.mu.Unlock()
	if gaveWay != nil {
		gaveWay.cancel(ErrGaveWay)
	}
	stopExpiry := func() bool { return false }
	if !p.ExpiresAt.IsZero() {
		// The deadline is on the server's clock (a.now), as the expiry checks are.
		timer := time.AfterFunc(p.ExpiresAt.Sub(a.now()), func() { cancel(ErrKeyExpired) })
		stopExpiry = timer.Stop
	}
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
			a.uncount(s)
			a.mu.Unlock()
			stopExpiry()
			cancel(context.Canceled)
		})
	}, nil
}

// giveWay picks, on a full replica, the session that makes room for one of account's: the
// newest of the account holding the most, when that account holds at least two more than
// account (after the exchange it still holds as many, so two accounts never take turns). The
// session stops counting at once; the caller ends it. Nil when account holds as many as any.
// Called with a.mu held.
func (a *Authenticator) giveWay(account string) *keySession {
	heaviest, most := "", 0
	for acct, n := range a.accountSessions {
		if n > most {
			heaviest, most = acct, n
		}
	}
	if most < a.accountSessions[account]+2 {
		return nil
	}
	var newest *keySession
	for _, sessions := range a.sessions {
		for s := range sessions {
			if s.account == heaviest && s.counted && (newest == nil || s.opened > newest.opened) {
				newest = s
			}
		}
	}
	if newest != nil {
		a.uncount(newest)
	}
	return newest
}

// uncount takes s out of its account's and the replica's counts, once. Called with a.mu held.
func (a *Authenticator) uncount(s *keySession) {
	if !s.counted {
		return
	}
	s.counted = false
	if a.accountSessions[s.account]--; a.accountSessions[s.account] <= 0 {
		delete(a.accountSessions, s.account)
	}
	a.openSessions--
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
