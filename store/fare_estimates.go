package store

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// FareEstimate is a priced route that its creator may book once before ExpiresAt. The creator
// is the principal that asked for it (role, subject, account); CreatorSubject is empty for an
// admin. The booking that consumes it sets UsedAt, then TripID, in its transaction. Amounts are
// minor units of Currency.
type FareEstimate struct {
	ID                 string `gorm:"column:id;primaryKey"` // est_…
	RideType           string
	City               string
	OriginLat          float64
	OriginLng          float64
	OriginAddress      *string
	DestinationLat     float64
	DestinationLng     float64
	DestinationAddress *string
	DistanceMeters     int64
	DurationSeconds    int64
	PriceMin           int64
	PriceMax           int64
	Currency           string
	CreatorRole        string
	CreatorSubject     string
	CreatorAccount     string
	CreatedAt          time.Time
	ExpiresAt          time.Time
	UsedAt             *time.Time
	TripID             *string
}

// TableName pins the table name so that GORM's naming rules can never move it.
func (FareEstimate) TableName() string { return "fare_estimates" }

// BeforeSave keeps stored times in UTC at microsecond precision.
func (e *FareEstimate) BeforeSave(*gorm.DB) error {
	e.normalize()
	return nil
}

// AfterFind returns times in UTC whatever the driver's location.
func (e *FareEstimate) AfterFind(*gorm.DB) error {
	e.normalize()
	return nil
}

func (e *FareEstimate) normalize() {
	normalizeTime(&e.CreatedAt)
	normalizeTime(&e.ExpiresAt)
	normalizeTimePtr(&e.UsedAt)
}

// fareEstimateColumns are an estimate's columns in the order of insertValues and scanDest.
// Every booking writes one estimate and reads it back: both statements are written out
// (store/inserts.go says why).
const fareEstimateColumns = `id, ride_type, city, origin_lat, origin_lng, origin_address,
    destination_lat, destination_lng, destination_address, distance_meters, duration_seconds,
    price_min, price_max, currency, creator_role, creator_subject, creator_account, created_at,
    expires_at, used_at, trip_id`

const (
	insertFareEstimateSQL = `INSERT INTO fare_estimates (` + fareEstimateColumns + `)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	fareEstimateByIDSQL = `SELECT ` + fareEstimateColumns + ` FROM fare_estimates WHERE id = ? AND creator_account = ?`
)

func (e *FareEstimate) insertValues() []any {
	e.normalize()
	return []any{e.ID, e.RideType, e.City, e.OriginLat, e.OriginLng, e.OriginAddress,
		e.DestinationLat, e.DestinationLng, e.DestinationAddress, e.DistanceMeters, e.DurationSeconds,
		e.PriceMin, e.PriceMax, e.Currency, e.CreatorRole, e.CreatorSubject, e.CreatorAccount, e.CreatedAt,
		e.ExpiresAt, e.UsedAt, e.TripID}
}

func (e *FareEstimate) scanDest() []any {
	return []any{&e.ID, &e.RideType, &e.City, &e.OriginLat, &e.OriginLng, &e.OriginAddress,
		&e.DestinationLat, &e.DestinationLng, &e.DestinationAddress, &e.DistanceMeters, &e.DurationSeconds,
		&e.PriceMin, &e.PriceMax, &e.Currency, &e.CreatorRole, &e.CreatorSubject, &e.CreatorAccount, &e.CreatedAt,
		&e.ExpiresAt, &e.UsedAt, &e.TripID}
}

// CreateFareEstimate inserts an estimate and returns it as stored. ErrDuplicate when the id
// exists; ErrInvalidReference when the city does not.
func (s *Store) CreateFareEstimate(ctx context.Context, e FareEstimate) (FareEstimate, error) {
	if err := s.execSQL(ctx, insertFareEstimateSQL, e.insertValues()...).err; err != nil {
		return FareEstimate{}, interpretError(err)
	}
	return e, nil
}

// FareEstimateByID returns one estimate of the account, or ErrNotFound: another account's
// estimate is absent as a missing one is, in the same single read.
func (s *Store) FareEstimateByID(ctx context.Context, account, id string) (FareEstimate, error) {
	var e FareEstimate
	if err := s.readRow(ctx, fareEstimateByIDSQL, []any{id, account}, e.scanDest()...); err != nil {
		return FareEstimate{}, err
	}
	e.normalize()
	return e, nil
}

// The booking's updates of its estimate, as constant statements (execSQL): GORM's update
// builds its clauses and runs its hooks on every call.
const (
	markFareEstimateUsedSQL = `UPDATE fare_estimates SET used_at = ? WHERE id = ? AND used_at IS NULL`
	setFareEstimateTripSQL  = `UPDATE fare_estimates SET trip_id = ? WHERE id = ? AND used_at IS NOT NULL AND trip_id IS NULL`
)

// MarkFareEstimateUsedParams consumes an estimate.
type MarkFareEstimateUsedParams struct {
	ID string
	At time.Time
}

// MarkFareEstimateUsed consumes an estimate if nobody has yet, in one conditional update, so
// that of two concurrent bookings of the same estimate exactly one wins (on PostgreSQL the
// second waits for the first's row lock, then finds it used). Call SetFareEstimateTrip in the
// same transaction once the trip exists. ErrConflict when the estimate is already used (or
// does not exist).
func (s *Store) MarkFareEstimateUsed(ctx context.Context, p MarkFareEstimateUsedParams) error {
	return changedRows(s.execSQL(ctx, markFareEstimateUsedSQL, utcMicro(p.At), p.ID), ErrConflict)
}

// SetFareEstimateTripParams links a consumed estimate to the trip booked from it.
type SetFareEstimateTripParams struct {
	ID     string
	TripID string
}

// SetFareEstimateTrip records which trip a consumed estimate became. ErrConflict when the
// estimate is not consumed or already linked; ErrInvalidReference when the trip does not exist.
func (s *Store) SetFareEstimateTrip(ctx context.Context, p SetFareEstimateTripParams) error {
	return changedRows(s.execSQL(ctx, setFareEstimateTripSQL, p.TripID, p.ID), ErrConflict)
}
