package store

import (
	"time"

	"gorm.io/gorm"
)

// Trip statuses, as stored. The lifecycle rules live in the domain package; the database only
// rejects values outside this set.
const (
	// TripStatusAccepted means a driver was matched at booking.
	TripStatusAccepted = "accepted"
	// TripStatusArriving means the driver is on the way to the pickup.
	TripStatusArriving = "arriving"
	// TripStatusInProgress means the rider is on board.
	TripStatusInProgress = "in_progress"
	// TripStatusCompleted is final: the trip reached its destination.
	TripStatusCompleted = "completed"
	// TripStatusCancelled is final: the trip ended before completion.
	TripStatusCancelled = "cancelled"
)

// ActiveTripStatuses are the statuses in which a trip holds its driver.
var ActiveTripStatuses = []string{TripStatusAccepted, TripStatusArriving, TripStatusInProgress}

// Ride types, as stored.
const (
	// RideTypeEconomy is the standard, cheapest ride.
	RideTypeEconomy = "economy"
	// RideTypeComfort is a newer, roomier car at a higher rate.
	RideTypeComfort = "comfort"
	// RideTypeXL seats up to six at the highest rate.
	RideTypeXL = "xl"
)

// API key roles, as stored.
const (
	// RoleRider keys act for one rider (the key's subject).
	RoleRider = "rider"
	// RoleDriver keys act for one driver (the key's subject).
	RoleDriver = "driver"
	// RoleAdmin keys act for the whole account and have no subject.
	RoleAdmin = "admin"
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

// Driver is a driver with their vehicle. Lat and Lng are the current position: internal
// dispatch data that no public view may show.
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
	Lat          float64 `json:"-"` // internal
	Lng          float64 `json:"-"` // internal
	Available    bool
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
}

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

// Trip is one ride from booking to its final status. Driver is the trip's driver as trips
// show it, read with the trip by the store's trip queries (the driver's other columns are
// DriverByID's); CreateTrip ignores it. RoutePolyline, MatchingScore, DriverPayout and
// PlatformCost are internal route, dispatch and cost-basis data that no public view may show:
// CreateTrip stores them, and the trip reads that serve the API (TripByID, ListTrips and the
// like) leave them zero.
type Trip struct {
	ID             string `gorm:"column:id;primaryKey"`
	Account        string // the rider's account
	Status         string
	RideType       string
	City           string
	RiderID        string
	DriverID       string
	Driver         TripDriver `gorm:"-"`
	PickupLat      float64
	PickupLng      float64
	PickupAddress  *string
	DropoffLat     float64
	DropoffLng     float64
	DropoffAddress *string
	PickupTime     time.Time
	FareTotal      int64  // minor units of FareCurrency
	FareCurrency   string // lowercase ISO 4217
	ETAMinutes     *int   `gorm:"column:eta_minutes"`
	CreatedAt      time.Time
	UpdatedAt      time.Time
	CompletedAt    *time.Time
	CancelledAt    *time.Time
	RoutePolyline  string  `json:"-"` // internal
	MatchingScore  float64 `json:"-"` // internal
	DriverPayout   int64   `json:"-"` // internal, minor units
	PlatformCost   int64   `json:"-"` // internal, minor units
}

// TableName pins the table name so that GORM's naming rules can never move it.
func (Trip) TableName() string { return "trips" }

// BeforeSave keeps stored times in UTC at microsecond precision, which keyset order on SQLite
// depends on.
func (t *Trip) BeforeSave(*gorm.DB) error {
	t.normalize()
	return nil
}

// AfterFind returns times in UTC whatever the driver's location.
func (t *Trip) AfterFind(*gorm.DB) error {
	t.normalize()
	return nil
}

// TripDriver is what a trip shows of its driver: the public profile (the REST DriverSummary,
// GraphQL's Driver). Trip reads join only these columns: the whole driver row was 14 of a
// trip's 38 columns, and on PostgreSQL every column costs allocations in database/sql.
type TripDriver struct {
	ID     string
	Name   string
	Rating float64
	Photo  string
}

// Summary is what a trip shows of d.
func (d Driver) Summary() TripDriver {
	return TripDriver{ID: d.ID, Name: d.Name, Rating: d.Rating, Photo: d.Photo}
}

func (t *Trip) normalize() {
	normalizeTime(&t.PickupTime)
	normalizeTime(&t.CreatedAt)
	normalizeTime(&t.UpdatedAt)
	normalizeTimePtr(&t.CompletedAt)
	normalizeTimePtr(&t.CancelledAt)
}

// APIKey is a credential. Only the SHA-256 of its secret is stored (Hash, lowercase hex);
// Prefix is the secret's first characters, which identify it to humans and reveal nothing.
// Subject is the rider's or driver's id for those roles and nil for admin; Account is the
// tenant. A revoked key keeps its row, with RevokedAt set; a key past ExpiresAt is refused.
// LastUsedAt is recorded coarsely (see the server's authenticator).
type APIKey struct {
	ID          string `gorm:"column:id;primaryKey"` // key_…
	Hash        string
	Prefix      string
	Role        string
	Subject     *string
	Account     string
	Description *string
	CreatedAt   time.Time
	ExpiresAt   *time.Time
	LastUsedAt  *time.Time
	RevokedAt   *time.Time
}

// TableName pins the table name so that GORM's naming rules can never move it.
func (APIKey) TableName() string { return "api_keys" }

// BeforeSave keeps stored times in UTC at microsecond precision.
func (k *APIKey) BeforeSave(*gorm.DB) error {
	k.normalize()
	return nil
}

// AfterFind returns times in UTC whatever the driver's location.
func (k *APIKey) AfterFind(*gorm.DB) error {
	k.normalize()
	return nil
}

func (k *APIKey) normalize() {
	normalizeTime(&k.CreatedAt)
	normalizeTimePtr(&k.ExpiresAt)
	normalizeTimePtr(&k.LastUsedAt)
	normalizeTimePtr(&k.RevokedAt)
}

// normalizeTime puts t in UTC at microsecond precision; the zero time stays zero so that GORM
// still fills automatic timestamps.
func normalizeTime(t *time.Time) {
	if !t.IsZero() {
		*t = t.UTC().Truncate(time.Microsecond)
	}
}

// normalizeTimePtr does the same for an optional time. It stores a fresh copy rather than
// writing through the pointer, which may be shared with the caller.
func normalizeTimePtr(t **time.Time) {
	if *t != nil {
		v := **t
		normalizeTime(&v)
		*t = &v
	}
}

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
