package store

import (
	"context"
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

// RecordDriverPosition makes p the driver's position unless the driver already has one
// recorded at or after p.RecordedAt: reports that arrive late, out of order or twice change
// nothing. It returns the driver as stored afterwards and whether p was taken. ErrNotFound
// for an unknown driver.
func (s *Store) RecordDriverPosition(ctx context.Context, driverID string, p DriverPosition) (Driver, bool, error) {
	at := utcMicro(p.RecordedAt)
	res := s.conn(ctx).Table("drivers").
		Where("id = ? AND (position_at IS NULL OR position_at < ?)", driverID, at).
		UpdateColumns(map[string]any{
			"lat": p.Lat, "lng": p.Lng, "heading": p.Heading, "speed": p.Speed, "position_at": at,
		})
	if res.Error != nil {
		return Driver{}, false, interpretError(res.Error)
	}
	d, err := s.DriverByID(ctx, driverID)
	return d, res.RowsAffected == 1, err
}

// ActiveTripOfDriver is the id of the trip the driver is driving (accepted, arriving or in
// progress), or ErrNotFound when they drive none.
func (s *Store) ActiveTripOfDriver(ctx context.Context, driverID string) (string, error) {
	var id string
	err := s.conn(ctx).Table("trips").Select("id").
		Where("driver_id = ? AND status IN ?", driverID, ActiveTripStatuses).
		Limit(1).Row().Scan(&id)
	if err != nil {
		return "", interpretError(err) // sql.ErrNoRows is ErrNotFound
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
