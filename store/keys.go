package store

import (
	"context"
)

// CreateAPIKey stores a key (its hash, never its secret). ErrDuplicate when the id or the hash
// exists already.
func (s *Store) CreateAPIKey(ctx context.Context, k APIKey) error {
	return interpretError(s.conn(ctx).Create(&k).Error)
}

// APIKeyByHash returns the key whose secret hashes to hash (lowercase hex SHA-256), or
// ErrNotFound. A revoked key is returned too, with RevokedAt set: authentication decides what
// a revoked key means, and can tell it apart from an unknown one in its logs.
func (s *Store) APIKeyByHash(ctx context.Context, hash string) (APIKey, error) {
	var k APIKey
	if err := s.conn(ctx).Where("hash = ?", hash).Take(&k).Error; err != nil {
		return APIKey{}, interpretError(err)
	}
	return k, nil
}

// RevokeAPIKey marks the key with this hash revoked now. Revoking a revoked key is a no-op that
// keeps the first revocation time; an unknown hash is ErrNotFound. One conditional UPDATE, so
// concurrent revocations agree on the time.
func (s *Store) RevokeAPIKey(ctx context.Context, hash string) error {
	db := s.conn(ctx)
	res := db.Model(&APIKey{}).
		Where("hash = ? AND revoked_at IS NULL", hash).
		Update("revoked_at", db.NowFunc())
	if res.Error != nil {
		return interpretError(res.Error)
	}
	if res.RowsAffected > 0 {
		return nil
	}
	// Nothing changed: either already revoked (fine) or unknown.
	var n int64
	if err := s.conn(ctx).Model(&APIKey{}).Where("hash = ?", hash).Count(&n).Error; err != nil {
		return interpretError(err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}
