// Package auth knows who calls: API keys (their secrets, creation and checks), the
// authenticator that resolves a bearer key to a Principal, and the Principal itself, which the
// request pipeline puts in the request's context for the handlers.
package auth

import (
	"context"
	"time"

	"github.com/rideapi/ride/store"
)

// Roles a key can have; the store defines them because its schema checks them.
const (
	RoleRider  = store.RoleRider
	RoleDriver = store.RoleDriver
	RoleAdmin  = store.RoleAdmin
)

// DefaultAccount is the account of keys created without one; the demo keys belong to it.
const DefaultAccount = store.DefaultAccount

// Principal is who an API key speaks for.
type Principal struct {
	KeyID   string
	Role    string
	Subject string // the rider's or driver's id; empty for admin
	Account string
	// Platform tells whether Account is the platform's, whose admins administer the fleet.
	Platform bool
	// ExpiresAt is when the key stops acting; zero means never.
	ExpiresAt time.Time
}

// IsAdmin reports whether the principal may do everything within its account.
func (p Principal) IsAdmin() bool { return p.Role == RoleAdmin }

// AdministersFleet reports whether the principal is an admin of the platform, the only
// account whose admins create driver keys and read or change drivers' availability.
func (p Principal) AdministersFleet() bool { return p.IsAdmin() && p.Platform }

// expired reports whether the key has stopped acting at now.
func (p Principal) expired(now time.Time) bool {
	return !p.ExpiresAt.IsZero() && !now.Before(p.ExpiresAt)
}

// Is reports whether the principal is the given rider or driver.
func (p Principal) Is(role, subject string) bool { return p.Role == role && p.Subject == subject }

type principalKey struct{}

// principalCtx carries the caller in one allocation: context.WithValue would box the
// Principal in a second one.
type principalCtx struct {
	context.Context
	p Principal
}

func (c *principalCtx) Value(key any) any {
	if _, ok := key.(principalKey); ok {
		return &c.p
	}
	return c.Context.Value(key)
}

// WithPrincipal names the caller that ctx's work is done for.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return &principalCtx{Context: ctx, p: p}
}

// PrincipalFrom returns the authenticated caller; the gate guarantees one on secured operations.
func PrincipalFrom(ctx context.Context) Principal {
	if p, ok := ctx.Value(principalKey{}).(*Principal); ok {
		return *p
	}
	return Principal{}
}
