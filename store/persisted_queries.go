package store

import (
	"context"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// PersistedQuery is a GraphQL document registered by an account under the lowercase hex
// SHA-256 of its text, so that the account's clients can send the hash instead of the document
// (automatic persisted queries). Another account's registration of the same text is its own.
type PersistedQuery struct {
	Account   string `gorm:"column:account;primaryKey"`
	Hash      string `gorm:"column:hash;primaryKey"`
	Query     string
	CreatedAt time.Time
}

// TableName pins the table name so that GORM's naming rules can never move it.
func (PersistedQuery) TableName() string { return "persisted_queries" }

// BeforeSave keeps stored times in UTC at microsecond precision.
func (q *PersistedQuery) BeforeSave(*gorm.DB) error {
	normalizeTime(&q.CreatedAt)
	return nil
}

// AfterFind returns times in UTC whatever the driver's location.
func (q *PersistedQuery) AfterFind(*gorm.DB) error {
	normalizeTime(&q.CreatedAt)
	return nil
}

// PersistedQueryByHash returns the document the account registered under hash at or after
// notBefore, or ErrNotFound: an older registration has expired even while its row still waits
// to be purged.
func (s *Store) PersistedQueryByHash(ctx context.Context, account, hash string, notBefore time.Time) (PersistedQuery, error) {
	var q PersistedQuery
	err := s.conn(ctx).Where("account = ? AND hash = ? AND created_at >= ?", account, hash,
		notBefore.UTC().Truncate(time.Microsecond)).Take(&q).Error
	if err != nil {
		return PersistedQuery{}, interpretError(err)
	}
	return q, nil
}

// SavePersistedQuery registers a document, or renews the registration of one already stored
// (the text of a hash never changes, only its created_at moves forward).
func (s *Store) SavePersistedQuery(ctx context.Context, q PersistedQuery) error {
	err := s.conn(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "account"}, {Name: "hash"}},
		DoUpdates: clause.AssignmentColumns([]string{"created_at"}),
	}).Create(&q).Error
	return interpretError(err)
}

// DeletePersistedQueriesBefore purges the registrations older than before and reports how many
// it removed.
func (s *Store) DeletePersistedQueriesBefore(ctx context.Context, before time.Time) (int64, error) {
	res := s.conn(ctx).Where("created_at < ?", before.UTC().Truncate(time.Microsecond)).Delete(&PersistedQuery{})
	return res.RowsAffected, interpretError(res.Error)
}
