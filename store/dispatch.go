package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
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

// driverColumns are a driver's columns in the order of Driver.scanDest.
const driverColumns = `drivers.id, drivers.name, drivers.rating, drivers.photo, drivers.vehicle_make,
    drivers.vehicle_model, drivers.vehicle_color, drivers.vehicle_plate, drivers.city, drivers.lat,
    drivers.lng, drivers.heading, drivers.speed, drivers.position_at, drivers.available,
    drivers.online, drivers.ride_types, drivers.created_at, drivers.updated_at`

func (d *Driver) scanDest() []any {
	return []any{&d.ID, &d.Name, &d.Rating, &d.Photo, &d.VehicleMake, &d.VehicleModel, &d.VehicleColor,
		&d.VehiclePlate, &d.City, &d.Lat, &d.Lng, &d.Heading, &d.Speed, &d.PositionAt, &d.Available,
		&d.Online, &d.RideTypes, &d.CreatedAt, &d.UpdatedAt}
}

// squaredDistance ranks drivers by the equirectangular approximation: squared degree
// differences with longitude scaled by cos²(latitude), which the caller computes. Within a
// city it orders drivers as the great-circle distance does, and it is plain arithmetic, which
// SQLite evaluates without its optional math functions. Its values: lat, lat, lng, lng, scale.
const squaredDistance = "(drivers.lat - ?) * (drivers.lat - ?) + (drivers.lng - ?) * (drivers.lng - ?) * ?"

// The candidate of a claim, written out (store/inserts.go says why): every booking runs one,
// and GORM built its clauses and scanned the row through the model's schema on each call. Its
// values: city, fresh since, the ride type's LIKE pattern, [squaredDistance's and the squared
// radius,] squaredDistance's. On PostgreSQL the candidate is locked, skipping drivers other
// claims hold (claimCandidateLock).
const (
	claimCandidateSQL = `SELECT ` + driverColumns + ` FROM drivers
WHERE drivers.city = ? AND drivers.available AND drivers.online AND drivers.position_at >= ?
  AND (',' || drivers.ride_types || ',') LIKE ?`
	claimWithinSQL     = ` AND ` + squaredDistance + ` <= ?`
	claimNotBusySQL    = ` AND NOT EXISTS (SELECT 1 FROM trips WHERE trips.driver_id = drivers.id AND trips.status IN `
	claimNearestSQL    = ` ORDER BY ` + squaredDistance + `, drivers.id LIMIT 1`
	claimCandidateLock = ` FOR UPDATE SKIP LOCKED`
	claimDriverSQL     = `UPDATE drivers SET available = ?, updated_at = ? WHERE id = ? AND available`
)

// claimCandidate is the candidate's statement within the nearby radius or across the city,
// locking it or not.
type claimCandidate struct{ within, lock bool }

// claimCandidateQueries are the four statements, built once.
var claimCandidateQueries = func() map[claimCandidate]string {
	q := map[claimCandidate]string{}
	for _, within := range []bool{false, true} {
		for _, lock := range []bool{false, true} {
			sql := claimCandidateSQL
			if within {
				sql += claimWithinSQL
			}
			sql += claimNotBusySQL + activeStatusList + ")" + claimNearestSQL
			if lock {
				sql += claimCandidateLock
			}
			q[claimCandidate{within, lock}] = sql
		}
	}
	return q
}()

// claimNearest is ClaimNearestDriver among the drivers within meters of the pickup point.
func (s *Store) claimNearest(ctx context.Context, p ClaimNearestDriverParams, meters float64) (Driver, error) {
	scale := math.Cos(p.Lat * math.Pi / 180)
	scale *= scale
	within := !math.IsInf(meters, 1)
	query := claimCandidateQueries[claimCandidate{within: within, lock: s.engine == EnginePostgres}]
	vars := []any{p.City, utcMicro(p.FreshSince), "%," + p.RideType + ",%"}
	if within {
		vars = append(vars, p.Lat, p.Lat, p.Lng, p.Lng, scale, math.Pow(meters/metersPerDegree, 2))
	}
	vars = append(vars, p.Lat, p.Lat, p.Lng, p.Lng, scale)
	at := utcMicro(p.At)
	for range claimAttempts {
		var d Driver
		if err := s.readRow(ctx, query, vars, d.scanDest()...); err != nil {
			return Driver{}, err
		}
		res := s.execSQL(ctx, claimDriverSQL, false, at, d.ID)
		if res.err != nil {
			return Driver{}, interpretError(res.err)
		}
		if res.rows == 1 {
			d.normalize()
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
	return changedRows(resultOf(s.conn(ctx).Table("drivers").Where("id = ?", p.ID).UpdateColumns(updates)), ErrNotFound)
}
