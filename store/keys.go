package store

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// DefaultAccount is the account of keys created without one, and of every row written before
// accounts existed. Migrations make it the platform account (accounts.platform).
const DefaultAccount = "acct_default"

// apiKeyChangesChannel is the PostgreSQL notification channel of key creations and revocations.
const apiKeyChangesChannel = "ride_api_key_changes"

// API key roles, as stored.
const (
	// RoleRider keys act for one rider (the key's subject).
	RoleRider = "rider"
	// RoleDriver keys act for one driver (the key's subject).
	RoleDriver = "driver"
	// RoleAdmin keys act for the whole account and have no subject.
	RoleAdmin = "admin"
)

// APIKey is a credential. Only the SHA-256 of its secret is stored (Hash, lowercase hex);
// Prefix is the secret's first characters, which identify it to humans and reveal nothing.
// Subject is the rider's or driver's id for those roles and nil for admin; Account is the
// tenant. A revoked key keeps its row, with RevokedAt set; a key past ExpiresAt is refused.
// LastUsedAt is recorded coarsely (see the server's authenticator).
type APIKey struct {
	ID          string `gorm:"column:id;primaryKey"` // key_…
	Hash        string
	Prefix      string
	Role        string
	Subject     *string
	Account     string
	Description *string
	CreatedAt   time.Time
	ExpiresAt   *time.Time
	LastUsedAt  *time.Time
	RevokedAt   *time.Time
	// Revision is the key revision (APIKeyRevision) of the key's latest change: its creation or
	// its revocation.
	Revision int64
	// Platform tells whether Account is the platform's; read by APIKeyByHash only.
	Platform bool `gorm:"->;-:migration"`
}

// TableName pins the table name so that GORM's naming rules can never move it.
func (APIKey) TableName() string { return "api_keys" }

// BeforeSave keeps stored times in UTC at microsecond precision.
func (k *APIKey) BeforeSave(*gorm.DB) error {
	k.normalize()
	return nil
}

// AfterFind returns times in UTC whatever the driver's location.
func (k *APIKey) AfterFind(*gorm.DB) error {
	k.normalize()
	return nil
}

func (k *APIKey) normalize() {
	normalizeTime(&k.CreatedAt)
	normalizeTimePtr(&k.ExpiresAt)
	normalizeTimePtr(&k.LastUsedAt)
	normalizeTimePtr(&k.RevokedAt)
}

// CreateAPIKeyParams is a key to store and the limit it must stay within.
type CreateAPIKeyParams struct {
	Key APIKey
	// MaxActive is how many active keys (neither revoked nor expired at Key.CreatedAt) the
	// account may hold, this one included; 0 means no limit.
	MaxActive int
}

// CreateAPIKey stores a key (its hash, never its secret) and moves the key revision, so that
// every replica learns of it. It returns the key as stored. The account's row is created on its
// first key and locked while the limit is checked, so concurrent creations never exceed
// p.MaxActive: past it, ErrLimitReached. ErrDuplicate when the id or the hash exists already.
func (s *Store) CreateAPIKey(ctx context.Context, p CreateAPIKeyParams) (APIKey, error) {
	k := p.Key
	err := s.WithTx(ctx, func(tx *Store) error {
		if _, err := tx.lockAccount(ctx, k.Account); err != nil {
			return err
		}
		if p.MaxActive > 0 {
			var active int64
			at := floorMicro(k.CreatedAt)
			err := tx.conn(ctx).Model(&APIKey{}).
				Where("account = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)", k.Account, at).
				Count(&active).Error
			if err != nil {
				return err
			}
			if active >= int64(p.MaxActive) {
				return ErrLimitReached
			}
		}
		revision, err := tx.nextAPIKeyRevision(ctx)
		if err != nil {
			return err
		}
		k.Revision = revision
		return tx.conn(ctx).Create(&k).Error
	})
	if err != nil {
		return APIKey{}, interpretError(err)
	}
	if s.standbys != nil {
		s.standbys.created(ctx, k.ID)
	}
	return k, nil
}

// nextAPIKeyRevision moves the key revision by one and returns it. The row stays locked until
// the transaction ends, so revisions become visible in the order they were taken: a replica
// that reads revision r finds every key change up to r committed.
func (s *Store) nextAPIKeyRevision(ctx context.Context) (int64, error) {
	if err := s.conn(ctx).Exec("UPDATE api_key_changes SET revision = revision + 1 WHERE id = 1").Error; err != nil {
		return 0, err
	}
	var revision int64
	if err := s.conn(ctx).Raw("SELECT revision FROM api_key_changes WHERE id = 1").Scan(&revision).Error; err != nil {
		return 0, err
	}
	if s.engine == EnginePostgres {
		// Replicas listening learn of the change at commit, before their next poll.
		if err := s.conn(ctx).Exec("SELECT pg_notify(?, '')", apiKeyChangesChannel).Error; err != nil {
			return 0, err
		}
	}
	return revision, nil
}

// APIKeyByHash returns the key whose secret hashes to hash (lowercase hex SHA-256), or
// ErrNotFound. A revoked or expired key is returned too: authentication decides what it means,
// and can tell it apart from an unknown one in its logs.
// Platform tells whether the key's account is the platform's.
func (s *Store) APIKeyByHash(ctx context.Context, hash string) (APIKey, error) {
	var k APIKey
	err := s.conn(ctx).Table("api_keys").
		Select("api_keys.*, COALESCE(accounts.platform, ?) AS platform", false).
		Joins("LEFT JOIN accounts ON accounts.id = api_keys.account").
		Where("api_keys.hash = ?", hash).Take(&k).Error
	if err != nil {
		return APIKey{}, interpretError(err)
	}
	return k, nil
}

// APIKeyByID returns one of the account's keys, or ErrNotFound (also when it belongs to
// another account).
func (s *Store) APIKeyByID(ctx context.Context, account, id string) (APIKey, error) {
	var k APIKey
	if err := s.conn(ctx).Where("id = ? AND account = ?", id, account).Take(&k).Error; err != nil {
		return APIKey{}, interpretError(err)
	}
	return k, nil
}

// ListAPIKeys returns one page of the account's keys, revoked ones included, newest first
// (or oldest first, p.OldestFirst).
func (s *Store) ListAPIKeys(ctx context.Context, account string, p PageParams) (Page[APIKey], error) {
	base := func() *gorm.DB {
		return s.model(ctx, &APIKey{}).Where("api_keys.account = ?", account)
	}
	return byTime[APIKey](base, "api_keys.created_at", "api_keys.id", p)
}

// Keyset is the key's position in a list ordered by its time, for cursors.
func (k APIKey) Keyset() Keyset { return timeKeyset(k.CreatedAt, k.ID) }

// RevokeAPIKeyParams names the key to revoke and when.
type RevokeAPIKeyParams struct {
	Account string
	ID      string
	At      time.Time
}

// RevokeAPIKey marks one of the account's keys revoked at p.At and returns it. Revoking a
// revoked key changes nothing and keeps the first time; a key of another account, or none, is
// ErrNotFound. The revision that replicas poll (APIKeyRevision) moves in the same
// transaction, and the key records it: every replica forgets its cached copy of the key and
// ends what the key opened.
func (s *Store) RevokeAPIKey(ctx context.Context, p RevokeAPIKeyParams) (APIKey, error) {
	var key APIKey
	err := s.WithTx(ctx, func(tx *Store) error {
		var live int64
		err := tx.conn(ctx).Model(&APIKey{}).
			Where("id = ? AND account = ? AND revoked_at IS NULL", p.ID, p.Account).Count(&live).Error
		if err != nil {
			return err
		}
		if live > 0 {
			revision, err := tx.nextAPIKeyRevision(ctx)
			if err != nil {
				return err
			}
			err = tx.conn(ctx).Model(&APIKey{}).
				Where("id = ? AND account = ? AND revoked_at IS NULL", p.ID, p.Account).
				Updates(map[string]any{"revoked_at": floorMicro(p.At), "revision": revision}).Error
			if err != nil {
				return err
			}
		}
		key, err = tx.APIKeyByID(ctx, p.Account, p.ID)
		return err
	})
	if err != nil {
		return APIKey{}, interpretError(err)
	}
	return key, nil
}

// APIKeyRevision is a number that grows with every key created or revoked: a replica that sees
// it move reads the changes (APIKeyChangesSince).
func (s *Store) APIKeyRevision(ctx context.Context) (int64, error) {
	var revision int64
	err := s.conn(ctx).Raw("SELECT revision FROM api_key_changes WHERE id = 1").Scan(&revision).Error
	return revision, interpretError(err)
}

// APIKeyChange is a key as a replica's authenticator follows it: enough to know it exists
// (Hash) and whether it still acts.
type APIKeyChange struct {
	ID        string
	Hash      string
	ExpiresAt *time.Time
	RevokedAt *time.Time
	Revision  int64
}

// APIKeyChangesSince returns the keys created or revoked at revisions after `after` and up to
// `upTo` (a revision read before), in revision order. Every change up to upTo has committed
// (nextAPIKeyRevision), so a replica that walks the revisions this way misses none.
func (s *Store) APIKeyChangesSince(ctx context.Context, after, upTo int64) ([]APIKeyChange, error) {
	var changes []APIKeyChange
	err := s.conn(ctx).Model(&APIKey{}).Select("id, hash, expires_at, revoked_at, revision").
		Where("revision > ? AND revision <= ?", after, upTo).Order("revision").Find(&changes).Error
	return changes, interpretError(err)
}

// ActiveAPIKeys calls fn with every key that acts at now (neither revoked nor expired), in
// batches, for a replica's authenticator to start from. Keys changed while it runs may be
// reported or not: the caller reads the revision before, and the changes after it, to be sure
// of them.
func (s *Store) ActiveAPIKeys(ctx context.Context, now time.Time, fn func(keys []APIKeyChange)) error {
	const batch = 10_000
	after := ""
	for {
		var keys []APIKeyChange
		err := s.conn(ctx).Model(&APIKey{}).Select("id, hash, expires_at, revoked_at, revision").
			Where("revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?) AND hash > ?", floorMicro(now), after).
			Order("hash").Limit(batch).Find(&keys).Error
		if err != nil {
			return interpretError(err)
		}
		if len(keys) > 0 {
			fn(keys)
			after = keys[len(keys)-1].Hash
		}
		if len(keys) < batch {
			return nil
		}
	}
}

// FollowAPIKeyChanges calls fn each time a transaction that created or revoked a key commits,
// until ctx ends, and also when changes may have been missed (a lost connection). Only
// PostgreSQL tells; on SQLite it returns at once and replicas poll APIKeyRevision.
func (s *Store) FollowAPIKeyChanges(ctx context.Context, fn func()) {
	if s.sqlDB == nil || s.engine != EnginePostgres {
		return
	}
	s.listen(ctx, apiKeyChangesChannel, func(string) { fn() }, fn)
}

// APIKeyUse is the latest use of a key seen by one replica.
type APIKeyUse struct {
	ID string
	At time.Time
}

// TouchAPIKeys records the keys' latest uses. A use older than the one stored changes nothing,
// so replicas reporting out of order never move last_used_at backwards.
func (s *Store) TouchAPIKeys(ctx context.Context, uses []APIKeyUse) error {
	for _, u := range uses {
		at := floorMicro(u.At)
		err := s.conn(ctx).Model(&APIKey{}).
			Where("id = ? AND (last_used_at IS NULL OR last_used_at < ?)", u.ID, at).
			Update("last_used_at", at).Error
		if err != nil {
			return interpretError(err)
		}
	}
	return nil
}
