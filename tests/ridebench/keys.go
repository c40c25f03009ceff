package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rideapi/ride/server/app"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/store"
)

// benchKeyNote is the description of every key the benchmark makes. A run revokes those of the
// runs before it, so that a data set used again and again never fills its account's quota of
// active keys (app.MaxActiveAPIKeys): the fleet alone takes a key per reporting driver.
const benchKeyNote = "ridebench (revoked by the next run)"

// keyring makes the benchmark's keys on one database with the product's own code
// (app.NewAPIKey, what `rideapi keys create` runs), in the platform account.
type keyring struct {
	st *store.Store
}

// revokeEarlier revokes the active keys that earlier runs made, and says how many there were.
func (k keyring) revokeEarlier(ctx context.Context) (int, error) {
	var stale []string
	page := store.PageParams{Limit: 100}
	for {
		keys, err := k.st.ListAPIKeys(ctx, auth.DefaultAccount, page)
		if err != nil {
			return 0, fmt.Errorf("list keys: %w", err)
		}
		for _, key := range keys.Items {
			if key.RevokedAt == nil && key.Description != nil && *key.Description == benchKeyNote {
				stale = append(stale, key.ID)
			}
		}
		if !keys.MoreAfter || len(keys.Items) == 0 {
			break
		}
		last := keys.Items[len(keys.Items)-1].Keyset()
		page.After = &last
	}
	for _, id := range stale {
		_, err := k.st.RevokeAPIKey(ctx, store.RevokeAPIKeyParams{Account: auth.DefaultAccount, ID: id, At: time.Now()})
		if err != nil {
			return 0, fmt.Errorf("revoke key %s: %w", id, err)
		}
	}
	return len(stale), nil
}

// create makes a key of role for subject ("" for an admin) and returns its secret.
func (k keyring) create(ctx context.Context, role, subject string) (string, error) {
	note := benchKeyNote
	secret, _, err := app.NewAPIKey(ctx, k.st, app.APIKeyParams{Role: role, Subject: subject, Description: &note}, time.Now())
	if err != nil {
		return "", fmt.Errorf("create a %s key: %w", role, err)
	}
	return secret, nil
}

// copyKeys stores the keys of the -db database whose secrets are given in the -compare-db one
// too, so that the same keys authenticate on both servers, after revoking there the copies
// made by earlier runs.
func copyKeys(ctx context.Context, fromURL, toURL string, secrets []string) error {
	from, err := pgx.Connect(ctx, fromURL)
	if err != nil {
		return err
	}
	defer from.Close(ctx)
	to, err := pgx.Connect(ctx, toURL)
	if err != nil {
		return fmt.Errorf("-compare-db: %w", err)
	}
	defer to.Close(ctx)
	if _, err := to.Exec(ctx, `UPDATE api_keys SET revoked_at = now() WHERE description = $1 AND revoked_at IS NULL`, benchKeyNote); err != nil {
		return fmt.Errorf("-compare-db: revoke the keys of earlier runs: %w", err)
	}
	hashes := make([]string, len(secrets))
	for i, s := range secrets {
		hashes[i] = keyHash(s)
	}
	_, err = to.Exec(ctx, `CREATE TEMPORARY TABLE ridebench_copied_keys
		(id text, hash text, role text, subject text, account text, description text, created_at timestamptz)`)
	if err != nil {
		return err
	}
	rows, err := from.Query(ctx, `SELECT id, hash, role, subject, account, description, created_at
		FROM api_keys WHERE hash = ANY($1)`, hashes)
	if err != nil {
		return err
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]any, error) { return r.Values() })
	if err != nil {
		return err
	}
	if len(keys) != len(secrets) {
		return fmt.Errorf("found %d of the %d keys to copy to -compare-db", len(keys), len(secrets))
	}
	if _, err := to.CopyFrom(ctx, pgx.Identifier{"ridebench_copied_keys"},
		[]string{"id", "hash", "role", "subject", "account", "description", "created_at"}, pgx.CopyFromRows(keys)); err != nil {
		return err
	}
	_, err = to.Exec(ctx, `INSERT INTO api_keys (id, hash, role, subject, account, description, created_at)
		SELECT * FROM ridebench_copied_keys ON CONFLICT DO NOTHING`)
	if err != nil {
		return fmt.Errorf("copy the keys to -compare-db: %w", err)
	}
	return nil
}

// keyHash is what api_keys stores of a secret: its SHA-256, in hex.
func keyHash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}
