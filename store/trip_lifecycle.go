package store

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// Cancellation records who cancelled a trip through the cancellation resource, and why.
// CancelledBy is the caller's role.
type Cancellation struct {
	ID          string `gorm:"column:id;primaryKey"` // can_…
	TripID      string
	Reason      string
	CancelledBy string
	CreatedAt   time.Time
}

// TableName pins the table name so that GORM's naming rules can never move it.
func (Cancellation) TableName() string { return "cancellations" }

// BeforeSave keeps stored times in UTC at microsecond precision.
func (c *Cancellation) BeforeSave(*gorm.DB) error {
	normalizeTime(&c.CreatedAt)
	return nil
}

// AfterFind returns times in UTC whatever the driver's location.
func (c *Cancellation) AfterFind(*gorm.DB) error {
	normalizeTime(&c.CreatedAt)
	return nil
}

// SetTripStatusParams moves one trip from one status to another. The optional times are set
// with the move: PickupTime when the trip starts, CompletedAt or CancelledAt when it ends.
type SetTripStatusParams struct {
	ID          string
	From, To    string
	At          time.Time // the new updated_at
	PickupTime  *time.Time
	CompletedAt *time.Time
	CancelledAt *time.Time
}

// SetTripStatus applies a status change only if the trip is still in From, in one conditional
// update (`… WHERE id = ? AND status = ?`), never read-check-write: of two concurrent moves from
// the same status exactly one wins. ErrConflict when the trip is not in From (it moved on
// concurrently, or does not exist). The lifecycle rules themselves belong to the caller.
func (s *Store) SetTripStatus(ctx context.Context, p SetTripStatusParams) error {
	updates := map[string]any{"status": p.To, "updated_at": utcMicro(p.At)}
	for column, t := range map[string]*time.Time{
		"pickup_time": p.PickupTime, "completed_at": p.CompletedAt, "cancelled_at": p.CancelledAt,
	} {
		if t != nil {
			updates[column] = utcMicro(*t)
		}
	}
	return changedRows(resultOf(s.conn(ctx).Table("trips").Where("id = ? AND status = ?", p.ID, p.From).UpdateColumns(updates)), ErrConflict)
}

// RiderHasActiveTrip reports whether the account's rider has a trip that is not final;
// ErrNotFound when the account has no such rider, as for a missing one, in the same single
// read. Booking asks first, to answer precisely; the partial unique index still guards
// against a concurrent booking of the same rider (see CreateTrip).
func (s *Store) RiderHasActiveTrip(ctx context.Context, account, riderID string) (bool, error) {
	var busy bool
	if err := s.readRow(ctx, riderHasActiveTripSQL, []any{riderID, account}, &busy); err != nil {
		return false, err
	}
	return busy, nil
}

var riderHasActiveTripSQL = `SELECT EXISTS (SELECT 1 FROM trips WHERE trips.rider_id = riders.id AND trips.status IN ` +
	activeStatusList + `) FROM riders WHERE riders.id = ? AND riders.account = ?`

// CreateCancellation records a trip's cancellation. ErrDuplicate when the trip already has one;
// ErrInvalidReference when the trip does not exist.
func (s *Store) CreateCancellation(ctx context.Context, c Cancellation) (Cancellation, error) {
	if err := s.conn(ctx).Create(&c).Error; err != nil {
		return Cancellation{}, interpretError(err)
	}
	return c, nil
}

// CancellationByTrip returns the cancellation of a trip, or ErrNotFound.
func (s *Store) CancellationByTrip(ctx context.Context, tripID string) (Cancellation, error) {
	var c Cancellation
	if err := s.conn(ctx).Where("trip_id = ?", tripID).Take(&c).Error; err != nil {
		return Cancellation{}, interpretError(err)
	}
	return c, nil
}
