package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/problem"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// API keys: who may hold one, for whom, and how many.

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
		p.Account = auth.DefaultAccount
	}
	if err := checkKeySubject(ctx, st, p); err != nil {
		return "", store.APIKey{}, err
	}
	now = now.UTC().Truncate(time.Microsecond)
	if p.ExpiresAt != nil && !p.ExpiresAt.After(now) {
		return "", store.APIKey{}, keyParamsError(problem.InvalidKeyExpiry, "body.expires_at",
			"expires_at must lie in the future.")
	}
	secret, hash, shown, err := auth.NewSecret()
	if err != nil {
		return "", store.APIKey{}, err
	}
	key := store.APIKey{
		ID:          ride.NewID(ride.PrefixAPIKey),
		Hash:        hash,
		Prefix:      shown,
		Role:        p.Role,
		Account:     p.Account,
		Description: p.Description,
		CreatedAt:   now,
		ExpiresAt:   p.ExpiresAt,
	}
	if p.Subject != "" {
		key.Subject = &p.Subject
	}
	key, err = st.CreateAPIKey(ctx, store.CreateAPIKeyParams{Key: key, MaxActive: MaxActiveAPIKeys})
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
	case auth.RoleRider, auth.RoleDriver:
		if p.Subject == "" {
			return keyParamsError(problem.InvalidKeySubject, "body.subject",
				fmt.Sprintf("A %s key needs a subject: the %s's id.", p.Role, p.Role))
		}
	case auth.RoleAdmin:
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
	case auth.RoleRider:
		if ride.ValidID(ride.PrefixRider, p.Subject) {
			_, err = st.RiderOfAccount(ctx, p.Account, p.Subject)
		} else {
			err = store.ErrNotFound
		}
	case auth.RoleDriver:
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
		if p.Role == auth.RoleDriver {
			where = "of the fleet"
		}
		return keyParamsError(problem.InvalidKeySubject, "body.subject",
			fmt.Sprintf("No %s %s has the id %s.", p.Role, where, problem.TruncateID(p.Subject)))
	}
	return err
}

func keyParamsError(code, location, detail string) *problem.Error {
	return &problem.Error{Status: 422, Code: code, Detail: detail,
		Fields: []problem.FieldError{{Location: location, Message: detail}}}
}

// CreateAPIKey creates a key of the caller's account, for an admin, and returns its secret,
// shown once.
func (a *App) CreateAPIKey(ctx context.Context, caller auth.Principal, p APIKeyParams) (string, store.APIKey, error) {
	if err := RequireAdmin(caller, "create API keys"); err != nil {
		return "", store.APIKey{}, err
	}
	p.Account = caller.Account
	return NewAPIKey(ctx, a.Store(ctx), p, a.now())
}

// RevokeAPIKey revokes one of the caller's account's keys, for an admin. Revoking a revoked
// key changes nothing; another account's key, or none, is a 404.
func (a *App) RevokeAPIKey(ctx context.Context, caller auth.Principal, id string) (store.APIKey, error) {
	if err := RequireAdmin(caller, "revoke API keys"); err != nil {
		return store.APIKey{}, err
	}
	if !ride.ValidID(ride.PrefixAPIKey, id) {
		return store.APIKey{}, NotFound("API key", id)
	}
	key, err := a.Store(ctx).RevokeAPIKey(ctx, store.RevokeAPIKeyParams{Account: caller.Account, ID: id, At: a.now()})
	if err != nil {
		return store.APIKey{}, NotFoundAs(err, "API key", id)
	}
	return key, nil
}

// APIKeys is one page of the caller's account's keys, revoked ones included, for an admin.
func (a *App) APIKeys(ctx context.Context, caller auth.Principal, page store.PageParams) (store.Page[store.APIKey], error) {
	if err := RequireAdmin(caller, "list API keys"); err != nil {
		return store.Page[store.APIKey]{}, err
	}
	return a.Store(ctx).ListAPIKeys(ctx, caller.Account, page)
}

// Operator is who the command line acts as: the operator of the service, with an admin's
// powers in the account it names.
func Operator(account string) auth.Principal {
	return auth.Principal{Role: auth.RoleAdmin, Account: account}
}
