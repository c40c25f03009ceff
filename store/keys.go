package store

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// DefaultAccount is the platform's own account: keys created without one belong to it, and
// so does every row written before accounts existed.
const DefaultAccount = "acct_default"

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

// CreateAPIKey stores a key (its hash, never its secret). ErrDuplicate when the id or the hash
// exists already.
func (s *Store) CreateAPIKey(ctx context.Context, k APIKey) error {
	return interpretError(s.conn(ctx).Create(&k).Error)
}

// APIKeyByHash returns the key whose secret hashes to hash (lowercase hex SHA-256), or
// ErrNotFound. A revoked or expired key is returned too: authentication decides what it means,
// and can tell it apart from an unknown one in its logs.
func (s *Store) APIKeyByHash(ctx context.Context, hash string) (APIKey, error) {
	var k APIKey
	if err := s.conn(ctx).Where("hash = ?", hash).Take(&k).Error; err != nil {
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
// transaction, so every replica forgets its cached copy of the key.
func (s *Store) RevokeAPIKey(ctx context.Context, p RevokeAPIKeyParams) (APIKey, error) {
	var key APIKey
	err := s.WithTx(ctx, func(tx *Store) error {
		res := tx.conn(ctx).Model(&APIKey{}).
			Where("id = ? AND account = ? AND revoked_at IS NULL", p.ID, p.Account).
			Update("revoked_at", floorMicro(p.At))
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected > 0 {
			if err := tx.conn(ctx).Exec("UPDATE api_key_changes SET revision = revision + 1 WHERE id = 1").Error; err != nil {
				return err
			}
		}
		var err error
		key, err = tx.APIKeyByID(ctx, p.Account, p.ID)
		return err
	})
	if err != nil {
		return APIKey{}, interpretError(err)
	}
	return key, nil
}

// APIKeyRevision is a number that grows with every revocation: a replica that sees it move
// drops the keys it has cached.
func (s *Store) APIKeyRevision(ctx context.Context) (int64, error) {
	var revision int64
	err := s.conn(ctx).Raw("SELECT revision FROM api_key_changes WHERE id = 1").Scan(&revision).Error
	return revision, interpretError(err)
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
