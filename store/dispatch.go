package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"gorm.io/gorm/clause"
)

// ClaimNearestDriverParams asks for the free, online driver of a city and ride type nearest
// to a pickup point, by positions recorded at or after FreshSince.
type ClaimNearestDriverParams struct {
	City       string
	RideType   string
	Lat, Lng   float64
	FreshSince time.Time
	At         time.Time
}

// claimAttempts bounds how often ClaimNearestDriver retries when the driver it picked was
// taken between its select and its update (possible only outside a PostgreSQL row lock).
const claimAttempts = 3

// ClaimNearestDriver picks the available, online driver of the city and ride type nearest to
// (Lat, Lng) by a position recorded since FreshSince, and marks them unavailable, so that the
// trip about to be created owns them. Call it inside the booking transaction: a rollback
// frees the driver again. ErrNotFound when no driver is free.
//
// Two concurrent claims never get the same driver. On PostgreSQL the candidate is selected
// FOR UPDATE SKIP LOCKED: a driver another booking is claiming is skipped, not waited for, so
// concurrent bookings spread over the free drivers. SQLite runs one write transaction at a
// time. On both, the claim itself is conditional (`WHERE id = ? AND available`), and a driver
// who already has an active trip is never a candidate, whatever their flag says.
func (s *Store) ClaimNearestDriver(ctx context.Context, p ClaimNearestDriverParams) (Driver, error) {
	// The drivers within nearbyMeters first: in a busy city the nearest driver is among a few
	// of its drivers, and only they are checked for an active trip and sorted. The whole city
	// when none of them is free. Both find the nearest driver: any driver outside the circle
	// is farther than every driver inside it.
	d, err := s.claimNearest(ctx, p, nearbyMeters)
	if errors.Is(err, ErrNotFound) {
		return s.claimNearest(ctx, p, math.Inf(1))
	}
	return d, err
}

// nearbyMeters is the radius ClaimNearestDriver looks in first.
const nearbyMeters = 3_000

// metersPerDegree is the length of a degree of latitude (and of longitude at the equator),
// rounded down: CitiesAround relies on it being no more than ride.HaversineMeters' degree.
const metersPerDegree = 111_195.0

// claimNearest is ClaimNearestDriver among the drivers within meters of the pickup point.
func (s *Store) claimNearest(ctx context.Context, p ClaimNearestDriverParams, meters float64) (Driver, error) {
	// Rank by the equirectangular approximation: squared degree differences with longitude
	// scaled by cos(latitude), computed here. Within a city it orders drivers as the
	// great-circle distance does, and it is plain arithmetic, which SQLite evaluates without
	// its optional math functions.
	scale := math.Cos(p.Lat * math.Pi / 180)
	scale *= scale
	const squaredDistance = "(drivers.lat - ?) * (drivers.lat - ?) + (drivers.lng - ?) * (drivers.lng - ?) * ?"
	vars := []any{p.Lat, p.Lat, p.Lng, p.Lng, scale}
	nearest := clause.OrderBy{Expression: clause.Expr{
		SQL: squaredDistance + ", drivers.id", Vars: vars, WithoutParentheses: true,
	}}
	at := utcMicro(p.At)
	for range claimAttempts {
		q := s.conn(ctx).
			Where("drivers.city = ? AND drivers.available AND drivers.online AND drivers.position_at >= ?", p.City, utcMicro(p.FreshSince)).
			Where("(',' || drivers.ride_types || ',') LIKE ?", "%,"+p.RideType+",%")
		if !math.IsInf(meters, 1) {
			q = q.Where(squaredDistance+" <= ?", append(vars, math.Pow(meters/metersPerDegree, 2))...)
		}
		q = q.Where("NOT EXISTS (SELECT 1 FROM trips WHERE trips.driver_id = drivers.id AND trips.status IN " + activeStatusList + ")").
			Order(nearest)
		if s.engine == EnginePostgres {
			q = q.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate, Options: clause.LockingOptionsSkipLocked})
		}
		var d Driver
		if err := q.Take(&d).Error; err != nil {
			return Driver{}, interpretError(err)
		}
		res := s.conn(ctx).Table("drivers").
			Where("id = ? AND available", d.ID).
			UpdateColumns(map[string]any{"available": false, "updated_at": at})
		if res.Error != nil {
			return Driver{}, interpretError(res.Error)
		}
		if res.RowsAffected == 1 {
			d.Available, d.UpdatedAt = false, at
			return d, nil
		}
	}
	return Driver{}, fmt.Errorf("%w: every driver picked was taken before the claim", ErrConflict)
}

// ReleaseDriverParams makes a driver available again when their trip ends.
type ReleaseDriverParams struct {
	ID string
	At time.Time
	// Lat and Lng, when set, move the driver (to the drop-off of a completed trip), so the
	// next booking measures from where they are.
	Lat, Lng *float64
}

// ReleaseDriver marks a driver available. ErrNotFound when the driver does not exist.
func (s *Store) ReleaseDriver(ctx context.Context, p ReleaseDriverParams) error {
	if (p.Lat == nil) != (p.Lng == nil) {
		return errors.New("store: ReleaseDriver needs both Lat and Lng, or neither")
	}
	updates := map[string]any{"available": true, "updated_at": utcMicro(p.At)}
	if p.Lat != nil {
		updates["lat"], updates["lng"] = *p.Lat, *p.Lng
	}
	return changedRows(s.conn(ctx).Table("drivers").Where("id = ?", p.ID).UpdateColumns(updates), ErrNotFound)
}
