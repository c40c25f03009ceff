package store

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// Rider is a passenger of one account (tenant). DefaultPaymentToken is the payment provider's
// token: internal, never shown or logged.
type Rider struct {
	ID                  string `gorm:"column:id;primaryKey"`
	Account             string
	Name                string
	Rating              float64
	CreatedAt           time.Time
	DefaultPaymentToken string `json:"-"` // internal
}

// TableName pins the table name so that GORM's naming rules can never move it.
func (Rider) TableName() string { return "riders" }

// BeforeSave keeps stored times in UTC at microsecond precision.
func (r *Rider) BeforeSave(*gorm.DB) error {
	normalizeTime(&r.CreatedAt)
	if r.Account == "" {
		r.Account = DefaultAccount
	}
	return nil
}

// AfterFind returns times in UTC whatever the driver's location.
func (r *Rider) AfterFind(*gorm.DB) error {
	normalizeTime(&r.CreatedAt)
	return nil
}

// CreateRider inserts a rider and returns it as stored (created_at filled in when zero).
// ErrDuplicate when the id exists.
func (s *Store) CreateRider(ctx context.Context, r Rider) (Rider, error) {
	if err := s.conn(ctx).Create(&r).Error; err != nil {
		return Rider{}, interpretError(err)
	}
	return r, nil
}

// RiderOfAccount returns one rider of the account, or ErrNotFound: another account's rider is
// absent as a missing one is, in the same single read.
func (s *Store) RiderOfAccount(ctx context.Context, account, id string) (Rider, error) {
	var r Rider
	if err := s.conn(ctx).Where("id = ? AND account = ?", id, account).Take(&r).Error; err != nil {
		return Rider{}, interpretError(err)
	}
	return r, nil
}

// RiderByID returns one rider, or ErrNotFound. It is the service's own read; a caller's is
// RiderOfAccount.
func (s *Store) RiderByID(ctx context.Context, id string) (Rider, error) {
	var r Rider
	if err := s.conn(ctx).Where("id = ?", id).Take(&r).Error; err != nil {
		return Rider{}, interpretError(err)
	}
	return r, nil
}
