package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// SetDriverOnline records whether the driver takes new trips and returns the driver as
// stored. Setting the current value again writes nothing. ErrNotFound for an unknown driver.
func (s *Store) SetDriverOnline(ctx context.Context, id string, online bool, at time.Time) (Driver, error) {
	res := s.conn(ctx).Table("drivers").Where("id = ? AND online <> ?", id, online).
		UpdateColumns(map[string]any{"online": online, "updated_at": utcMicro(at)})
	if res.Error != nil {
		return Driver{}, interpretError(res.Error)
	}
	return s.DriverByID(ctx, id)
}

// DriverPosition is one position a driver's device recorded.
type DriverPosition struct {
	Lat, Lng   float64
	Heading    *float64
	Speed      *float64
	RecordedAt time.Time
}

// recordPositionSQL is RecordDriverPosition on PostgreSQL. The main query sees the driver as
// they were before the CTE's update, so the position it reads is the previous one; when the
// update took the report, the report is the position.
var recordPositionSQL = placeholders(recordPositionWith(""))

// recordPositionAsyncSQL is recordPositionSQL committing without waiting for the WAL flush
// (see openAsyncCommitPool): set_config in the statement itself, local to its transaction,
// where a connection's startup parameter would not pass PgBouncer and a SET would outlive the
// statement on a pooled server connection. PostgreSQL only.
var recordPositionAsyncSQL = placeholders(recordPositionWith(
	", async AS (SELECT set_config('synchronous_commit', 'off', true))"))

func recordPositionWith(async string) string {
	from := "FROM drivers d"
	if async != "" {
		from += ", async"
	}
	return `
WITH active AS (
    SELECT id FROM trips WHERE driver_id = ? AND status IN ` + activeStatusList + ` LIMIT 1
), taken AS (
    UPDATE drivers SET lat = ?, lng = ?, heading = ?, speed = ?, position_at = ?
    WHERE id = ? AND (position_at IS NULL OR position_at < ?)
      AND (online OR EXISTS (SELECT 1 FROM active))
    RETURNING 1
)` + async + `
SELECT d.online, COALESCE((SELECT id FROM active), ''), EXISTS (SELECT 1 FROM taken),
       d.lat, d.lng, d.heading, d.speed, d.position_at
` + from + ` WHERE d.id = ?`
}

// sqlText is one statement in both placeholder syntaxes: ? for GORM, $1… for pgx.
type sqlText struct{ marked, numbered string }

func placeholders(q string) sqlText {
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return sqlText{marked: q, numbered: b.String()}
}

// PositionReport is what recording a driver's position found and did.
type PositionReport struct {
	// Online and ActiveTripID are the driver's state when the position arrived.
	Online       bool
	ActiveTripID string // empty when they drive no trip
	// Taken tells whether the position became the driver's; Position is the driver's
	// position afterwards.
	Taken    bool
	Position DriverPosition
}

// RecordDriverPosition makes p the driver's position if they are online or drive a trip, and
// unless they already have a position recorded at or after p.RecordedAt: reports that arrive
// late, out of order or twice change nothing. ErrNotFound for an unknown driver.
//
// On PostgreSQL it is one statement, one round trip: positions are the most frequent write
// there is.
func (s *Store) RecordDriverPosition(ctx context.Context, driverID string, p DriverPosition) (PositionReport, error) {
	at := utcMicro(p.RecordedAt)
	if s.engine != EnginePostgres {
		var r PositionReport
		err := s.WithTx(ctx, func(tx *Store) error {
			d, err := tx.DriverByID(ctx, driverID)
			if err != nil {
				return err
			}
			r.Online = d.Online
			if r.ActiveTripID, err = tx.ActiveTripOfDriver(ctx, driverID); err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
			if current := d.Position(); current != nil {
				r.Position = *current
			}
			if !r.Online && r.ActiveTripID == "" {
				return nil
			}
			res := tx.conn(ctx).Table("drivers").
				Where("id = ? AND (position_at IS NULL OR position_at < ?)", driverID, at).
				UpdateColumns(map[string]any{"lat": p.Lat, "lng": p.Lng, "heading": p.Heading, "speed": p.Speed, "position_at": at})
			if res.Error != nil {
				return interpretError(res.Error)
			}
			r.Taken = res.RowsAffected == 1
			return nil
		})
		if r.Taken {
			p.RecordedAt = at
			r.Position = p
		}
		return r, err
	}
	args := []any{driverID, p.Lat, p.Lng, p.Heading, p.Speed, at, driverID, at, driverID}
	var row *sql.Row
	if s.async != nil {
		if err := s.asyncTurns.enter(ctx); err != nil {
			return PositionReport{}, interpretError(err)
		}
		defer s.asyncTurns.leave()
		row = s.async.QueryRowContext(ctx, recordPositionAsyncSQL.numbered, args...)
	} else {
		row = s.conn(ctx).Raw(recordPositionSQL.marked, args...).Row() // inside a request's transaction
	}
	var (
		r          PositionReport
		current    DriverPosition
		positionAt *time.Time
	)
	if err := row.Scan(&r.Online, &r.ActiveTripID, &r.Taken, &current.Lat, &current.Lng, &current.Heading, &current.Speed, &positionAt); err != nil {
		return PositionReport{}, interpretError(err)
	}
	if r.Taken && s.standbys != nil && s.async != nil {
		s.standbys.wroteAsync(ctx)
	}
	switch {
	case r.Taken:
		p.RecordedAt = at
		r.Position = p
	case positionAt != nil:
		current.RecordedAt = positionAt.UTC()
		r.Position = current
	}
	return r, nil
}

// ActiveTripOfDriver is the id of the trip the driver is driving (accepted, arriving or in
// progress), or ErrNotFound when they drive none.
func (s *Store) ActiveTripOfDriver(ctx context.Context, driverID string) (string, error) {
	var id string
	err := queryRow(s.conn(ctx).Table("trips").Select("id").
		Where("driver_id = ? AND status IN "+activeStatusList, driverID).Limit(1), &id)
	if err != nil {
		return "", err
	}
	return id, nil
}

// ReportPositionsInPlace records, for every online driver with a position, that position
// again at at: what a fleet of parked but running apps would report. The demo data keeps its
// drivers bookable with it. It returns how many drivers it touched.
func (s *Store) ReportPositionsInPlace(ctx context.Context, at time.Time) (int64, error) {
	at = utcMicro(at)
	res := s.conn(ctx).Table("drivers").Where("online AND position_at < ?", at).
		UpdateColumn("position_at", at)
	return res.RowsAffected, interpretError(res.Error)
}
