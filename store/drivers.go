package store

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// Driver is a driver with their vehicle. Lat, Lng, Heading, Speed and PositionAt are the
// latest position the driver reported (PositionAt nil until they report one); only the rider
// and admins of the driver's active trip may see it. Online drivers take new trips; RideTypes
// lists, comma-separated, the ride types their vehicle serves.
type Driver struct {
	ID           string `gorm:"column:id;primaryKey"`
	Name         string
	Rating       float64
	Photo        string // URL
	VehicleMake  string
	VehicleModel string
	VehicleColor string
	VehiclePlate string
	City         string
	Lat          float64    `json:"-"` // internal
	Lng          float64    `json:"-"` // internal
	Heading      *float64   `json:"-"` // internal
	Speed        *float64   `json:"-"` // internal
	PositionAt   *time.Time `json:"-"` // internal
	Available    bool
	Online       bool
	RideTypes    string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// TableName pins the table name so that GORM's naming rules can never move it.
func (Driver) TableName() string { return "drivers" }

// BeforeSave keeps stored times in UTC at microsecond precision.
func (d *Driver) BeforeSave(*gorm.DB) error {
	d.normalize()
	return nil
}

// AfterFind returns times in UTC whatever the driver's location.
func (d *Driver) AfterFind(*gorm.DB) error {
	d.normalize()
	return nil
}

func (d *Driver) normalize() {
	normalizeTime(&d.CreatedAt)
	normalizeTime(&d.UpdatedAt)
	normalizeTimePtr(&d.PositionAt)
	if d.RideTypes == "" {
		d.RideTypes = AllRideTypes
	}
}

// AllRideTypes is RideTypes of a driver who serves every ride type.
const AllRideTypes = "economy,comfort,xl"

// Summary is what a trip shows of d.
func (d Driver) Summary() TripDriver {
	return TripDriver{ID: d.ID, Name: d.Name, Rating: d.Rating, Photo: d.Photo, Position: d.Position()}
}

// Position is the driver's latest reported position, or nil before the first report.
func (d Driver) Position() *DriverPosition {
	if d.PositionAt == nil {
		return nil
	}
	return &DriverPosition{Lat: d.Lat, Lng: d.Lng, Heading: d.Heading, Speed: d.Speed, RecordedAt: *d.PositionAt}
}

// CreateDriver inserts a driver and returns it as stored (timestamps filled in when zero).
// ErrDuplicate when the id exists; ErrInvalidReference when the city does not.
func (s *Store) CreateDriver(ctx context.Context, d Driver) (Driver, error) {
	if err := s.conn(ctx).Create(&d).Error; err != nil {
		return Driver{}, interpretError(err)
	}
	return d, nil
}

// DriverByID returns one driver, or ErrNotFound.
func (s *Store) DriverByID(ctx context.Context, id string) (Driver, error) {
	var d Driver
	if err := s.conn(ctx).Where("id = ?", id).Take(&d).Error; err != nil {
		return Driver{}, interpretError(err)
	}
	return d, nil
}

// DriversByIDs returns the drivers among ids that exist, in one query and in no particular
// order. Ids that name no driver are simply absent from the result.
func (s *Store) DriversByIDs(ctx context.Context, ids []string) ([]Driver, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var drivers []Driver
	if err := s.conn(ctx).Where("id IN ?", ids).Find(&drivers).Error; err != nil {
		return nil, interpretError(err)
	}
	return drivers, nil
}
