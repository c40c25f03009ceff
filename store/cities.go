package store

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// City is a served area with its own currency and fare rates. Amounts are minor units of the
// city's currency.
type City struct {
	ID           string `gorm:"column:id;primaryKey"` // slug, e.g. "san-francisco"
	Name         string `gorm:"column:name"`
	CenterLat    float64
	CenterLng    float64
	RadiusMeters int
	Currency     string // lowercase ISO 4217
	BaseFare     int64
	PerKm        int64
	PerMinute    int64
	MinimumFare  int64
	CreatedAt    time.Time
}

// TableName pins the table name so that GORM's naming rules can never move it.
func (City) TableName() string { return "cities" }

// BeforeSave keeps stored times in UTC at microsecond precision.
func (c *City) BeforeSave(*gorm.DB) error {
	normalizeTime(&c.CreatedAt)
	return nil
}

// AfterFind returns times in UTC whatever the driver's location.
func (c *City) AfterFind(*gorm.DB) error {
	normalizeTime(&c.CreatedAt)
	return nil
}

// CreateCity inserts a served city and returns it as stored (created_at filled in when zero).
// ErrDuplicate when the slug exists.
func (s *Store) CreateCity(ctx context.Context, c City) (City, error) {
	if err := s.conn(ctx).Create(&c).Error; err != nil {
		return City{}, interpretError(err)
	}
	return c, nil
}

// CityByID returns one city by its slug, or ErrNotFound.
func (s *Store) CityByID(ctx context.Context, id string) (City, error) {
	var c City
	if err := s.conn(ctx).Where("id = ?", id).Take(&c).Error; err != nil {
		return City{}, interpretError(err)
	}
	return c, nil
}

// Cities returns every served city ordered by slug. The list is small (one row per city), so
// it has no paging.
func (s *Store) Cities(ctx context.Context) ([]City, error) {
	var cs []City
	if err := s.conn(ctx).Order("id").Find(&cs).Error; err != nil {
		return nil, interpretError(err)
	}
	return cs, nil
}

// CitiesAround returns the served cities, ordered by slug, whose area may contain a point at
// latitude lat: those whose center lies within their radius of lat along a meridian. Points
// Δ degrees of latitude apart are at least Δ × 111,195.08 m apart on the sphere the fares are
// measured on (ride.HaversineMeters), whatever their longitudes, and metersPerDegree is no
// more than that, so no city whose area holds the point is left out; the metre of slack
// absorbs rounding, on the float side (radius_meters + 1 would overflow PostgreSQL's integer
// for the largest radius the schema allows). The caller chooses among them by the exact
// distance. The database still reads every city row; an estimate receives and scans its one
// city instead of every served city.
//
// Every estimate runs it: the statement is written out and its rows scanned without GORM's
// schema (store/inserts.go says why).
func (s *Store) CitiesAround(ctx context.Context, lat float64) ([]City, error) {
	rows, err := s.rowSQL(ctx, citiesAroundSQL, lat, metersPerDegree).Rows()
	if err != nil {
		return nil, interpretError(err)
	}
	defer rows.Close()
	var cs []City
	for rows.Next() {
		var c City
		if err := rows.Scan(c.scanDest()...); err != nil {
			return nil, interpretError(err)
		}
		normalizeTime(&c.CreatedAt)
		cs = append(cs, c)
	}
	return cs, interpretError(rows.Err())
}

// cityColumns are a city's columns in the order of City.scanDest.
const cityColumns = `id, name, center_lat, center_lng, radius_meters, currency, base_fare, per_km,
    per_minute, minimum_fare, created_at`

const citiesAroundSQL = `SELECT ` + cityColumns + ` FROM cities
WHERE abs(center_lat - ?) * ? - 1 <= radius_meters ORDER BY id`

func (c *City) scanDest() []any {
	return []any{&c.ID, &c.Name, &c.CenterLat, &c.CenterLng, &c.RadiusMeters, &c.Currency, &c.BaseFare,
		&c.PerKm, &c.PerMinute, &c.MinimumFare, &c.CreatedAt}
}
