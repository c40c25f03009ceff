package store

import (
	"context"
	"time"
)

// CreateFareEstimate inserts an estimate and returns it as stored. ErrDuplicate when the id
// exists; ErrInvalidReference when the city does not.
func (s *Store) CreateFareEstimate(ctx context.Context, e FareEstimate) (FareEstimate, error) {
	if err := s.conn(ctx).Create(&e).Error; err != nil {
		return FareEstimate{}, interpretError(err)
	}
	return e, nil
}

// FareEstimateByID returns one estimate, or ErrNotFound.
func (s *Store) FareEstimateByID(ctx context.Context, id string) (FareEstimate, error) {
	var e FareEstimate
	if err := s.conn(ctx).Where("id = ?", id).Take(&e).Error; err != nil {
		return FareEstimate{}, interpretError(err)
	}
	return e, nil
}

// FareEstimateMarkUsedParams consumes an estimate.
type FareEstimateMarkUsedParams struct {
	ID string
	At time.Time
}

// FareEstimateMarkUsed consumes an estimate if nobody has yet, in one conditional update, so
// that of two concurrent bookings of the same estimate exactly one wins (on PostgreSQL the
// second waits for the first's row lock, then finds it used). Call FareEstimateSetTrip in the
// same transaction once the trip exists. ErrConflict when the estimate is already used (or
// does not exist).
func (s *Store) FareEstimateMarkUsed(ctx context.Context, p FareEstimateMarkUsedParams) error {
	res := s.conn(ctx).Table("fare_estimates").
		Where("id = ? AND used_at IS NULL", p.ID).
		UpdateColumn("used_at", utcMicro(p.At))
	return changedRows(res, ErrConflict)
}

// FareEstimateSetTripParams links a consumed estimate to the trip booked from it.
type FareEstimateSetTripParams struct {
	ID     string
	TripID string
}

// FareEstimateSetTrip records which trip a consumed estimate became. ErrConflict when the
// estimate is not consumed or already linked; ErrInvalidReference when the trip does not exist.
func (s *Store) FareEstimateSetTrip(ctx context.Context, p FareEstimateSetTripParams) error {
	res := s.conn(ctx).Table("fare_estimates").
		Where("id = ? AND used_at IS NOT NULL AND trip_id IS NULL", p.ID).
		UpdateColumn("trip_id", p.TripID)
	return changedRows(res, ErrConflict)
}

// utcMicro is t as every stored time is: UTC, whole microseconds. Writes through UpdateColumns
// bypass the models' hooks, so they normalise here.
func utcMicro(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}
