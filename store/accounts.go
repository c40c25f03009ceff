package store

import (
	"context"

	"gorm.io/gorm/clause"
)

// Account is a tenant as the store marks it. An account has a row once it has an API key; the
// rows of its riders, trips and the rest name it by id. Exactly one account is the platform:
// the one whose admins administer the shared fleet of drivers (migration 00012 makes it
// DefaultAccount).
type Account struct {
	ID       string `gorm:"column:id;primaryKey"`
	Platform bool
}

// TableName pins the table name so that GORM's naming rules can never move it.
func (Account) TableName() string { return "accounts" }

// IsPlatformAccount tells whether id is the platform's account; false for an account without
// a row.
func (s *Store) IsPlatformAccount(ctx context.Context, id string) (bool, error) {
	var platform []bool
	err := s.conn(ctx).Model(&Account{}).Where("id = ?", id).Limit(1).Pluck("platform", &platform).Error
	if err != nil {
		return false, interpretError(err)
	}
	return len(platform) == 1 && platform[0], nil
}

// lockAccount creates the account's row when it has none and locks it until the transaction
// ends (on SQLite every write transaction holds the database), so that changes counted per
// account, such as its active keys, never race. It returns the account.
func (s *Store) lockAccount(ctx context.Context, id string) (Account, error) {
	err := s.conn(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&Account{ID: id}).Error
	if err != nil {
		return Account{}, err
	}
	q := s.conn(ctx).Where("id = ?", id)
	if s.engine == EnginePostgres {
		q = q.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate})
	}
	var a Account
	return a, q.Take(&a).Error
}
