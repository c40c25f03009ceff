package store

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// Payment statuses, as stored.
const (
	// PaymentSucceeded means the provider charged the payment method.
	PaymentSucceeded = "succeeded"
	// PaymentFailed means the provider declined; FailureCode says why.
	PaymentFailed = "failed"
)

// Payment is one attempt to charge a trip's fare. PaymentMethod (the provider's token) and
// ProviderRef (the provider's charge id) are internal: no public view, event or log shows them.
type Payment struct {
	ID            string `gorm:"column:id;primaryKey"` // pay_…
	TripID        string
	Amount        int64  // minor units of Currency
	Currency      string // lowercase ISO 4217
	Status        string
	FailureCode   *string
	PaymentMethod string `json:"-"` // internal
	ProviderRef   string `json:"-"` // internal
	CreatedAt     time.Time
}

// TableName pins the table name so that GORM's naming rules can never move it.
func (Payment) TableName() string { return "payments" }

// BeforeSave keeps stored times in UTC at microsecond precision.
func (p *Payment) BeforeSave(*gorm.DB) error {
	normalizeTime(&p.CreatedAt)
	return nil
}

// AfterFind returns times in UTC whatever the driver's location.
func (p *Payment) AfterFind(*gorm.DB) error {
	normalizeTime(&p.CreatedAt)
	return nil
}

// Receipt is issued for a successful payment. LineItems is the JSON array of {kind, amount}
// lines as published; they add up to Amount.
type Receipt struct {
	ID        string `gorm:"column:id;primaryKey"` // rcp_…
	TripID    string
	PaymentID string
	Amount    int64
	Currency  string
	LineItems string // JSON
	IssuedAt  time.Time
}

// TableName pins the table name so that GORM's naming rules can never move it.
func (Receipt) TableName() string { return "receipts" }

// BeforeSave keeps stored times in UTC at microsecond precision, which keyset order on SQLite
// depends on.
func (r *Receipt) BeforeSave(*gorm.DB) error {
	normalizeTime(&r.IssuedAt)
	return nil
}

// AfterFind returns times in UTC whatever the driver's location.
func (r *Receipt) AfterFind(*gorm.DB) error {
	normalizeTime(&r.IssuedAt)
	return nil
}

// Keyset is the receipt's position in a list, newest first: issued_at as Unix microseconds,
// then its id.
func (r Receipt) Keyset() Keyset {
	return Keyset{Values: []int64{r.IssuedAt.UnixMicro()}, ID: r.ID}
}

// CityRates are the rates of a trip's city, which its receipt breaks the fare down by.
type CityRates struct {
	Currency    string
	BaseFare    int64
	PerKm       int64
	PerMinute   int64
	MinimumFare int64
}

// PayableTrip is what a payment reads of its trip: whose it is, where it stands, what it
// costs, the route its receipt breaks the fare down by, and its city's rates.
type PayableTrip struct {
	ID           string
	Account      string
	Status       string
	RiderID      string
	FareTotal    int64  // minor units of FareCurrency
	FareCurrency string // lowercase ISO 4217
	PickupLat    float64
	PickupLng    float64
	DropoffLat   float64
	DropoffLng   float64
	Rates        CityRates
}

// payableTripSQL selects a PayableTrip, in its order, by trip id and account: the trip's own
// columns and its city's, without the driver and the columns a trip's answer shows.
const payableTripSQL = `SELECT trips.id, trips.account, trips.status, trips.rider_id, trips.fare_total,
    trips.fare_currency, trips.pickup_lat, trips.pickup_lng, trips.dropoff_lat, trips.dropoff_lng,
    cities.currency, cities.base_fare, cities.per_km, cities.per_minute, cities.minimum_fare
FROM trips JOIN cities ON cities.id = trips.city WHERE trips.id = ? AND trips.account = ? LIMIT 1`

// payableTripLockedSQL is payableTripSQL locking the trip's row, where the engine has row
// locks (PostgreSQL).
const payableTripLockedSQL = payableTripSQL + ` FOR UPDATE OF trips`

// LockTripForPayment makes the calling transaction the only one paying the trip until it ends,
// and returns what the payment needs of it: on PostgreSQL the read takes a row lock (FOR
// UPDATE OF trips), so a second payment of the same trip waits and then sees the first one's
// outcome instead of charging the rider twice; on SQLite the transaction already holds the
// database's write lock (BEGIN IMMEDIATE). One statement, where a lock, a read and the city's
// were three round trips. ErrNotFound when the trip does not exist. Call it inside WithTx.
//
// Only a trip of the account is found: another account's is ErrNotFound, as a missing one,
// in the same single read.
func (s *Store) LockTripForPayment(ctx context.Context, account, tripID string) (PayableTrip, error) {
	query := payableTripSQL
	if s.engine == EnginePostgres {
		query = payableTripLockedSQL
	}
	var t PayableTrip
	r := &t.Rates
	err := s.readRow(ctx, query, []any{tripID, account}, &t.ID, &t.Account, &t.Status, &t.RiderID,
		&t.FareTotal, &t.FareCurrency, &t.PickupLat, &t.PickupLng, &t.DropoffLat, &t.DropoffLng,
		&r.Currency, &r.BaseFare, &r.PerKm, &r.PerMinute, &r.MinimumFare)
	if err != nil {
		return PayableTrip{}, err
	}
	return t, nil
}

// CreatePayment records a payment attempt. ErrDuplicate when the trip already has a succeeded
// payment (a unique index on succeeded payments per trip guards this even against concurrent
// writers) or the id exists; ErrInvalidReference when the trip does not exist.
//
// A duplicate is refused without a failed statement (ON CONFLICT DO NOTHING), so the calling
// transaction goes on: on PostgreSQL a failed statement would abort it, and the caller could
// then not record its answer in it.
func (s *Store) CreatePayment(ctx context.Context, p Payment) (Payment, error) {
	if p.CreatedAt.IsZero() {
		p.CreatedAt = s.db.NowFunc()
	}
	if err := changedRows(s.execSQL(ctx, insertPaymentSQL, p.insertValues()...), ErrDuplicate); err != nil {
		return Payment{}, err
	}
	return p, nil
}

// SucceededPaymentForTrip returns the trip's succeeded payment, or ErrNotFound while it has
// none.
func (s *Store) SucceededPaymentForTrip(ctx context.Context, tripID string) (Payment, error) {
	var p Payment
	err := s.conn(ctx).Where("trip_id = ? AND status = ?", tripID, PaymentSucceeded).Take(&p).Error
	if err != nil {
		return Payment{}, interpretError(err)
	}
	return p, nil
}

// TripPaid tells whether the trip has a succeeded payment. After LockTripForPayment it is
// the answer every later payer of the trip gets: in a statement of its own, it sees a payment
// committed while the lock was awaited (the store's transactions are READ COMMITTED, where
// each statement takes a new snapshot; folded into the lock's statement it would not).
func (s *Store) TripPaid(ctx context.Context, tripID string) (bool, error) {
	var paid bool
	err := s.readRow(ctx, `SELECT EXISTS (SELECT 1 FROM payments WHERE trip_id = ? AND status = ?)`,
		[]any{tripID, PaymentSucceeded}, &paid)
	return paid, err
}

// PaymentsForTrip lists every payment attempt of a trip, oldest first.
func (s *Store) PaymentsForTrip(ctx context.Context, tripID string) ([]Payment, error) {
	var ps []Payment
	err := s.conn(ctx).Where("trip_id = ?", tripID).Order("created_at, id").Find(&ps).Error
	return ps, interpretError(err)
}

// CreateReceipt stores a receipt. ErrInvalidReference when its trip or payment does not exist.
func (s *Store) CreateReceipt(ctx context.Context, r Receipt) (Receipt, error) {
	if err := s.execSQL(ctx, insertReceiptSQL, r.insertValues()...).err; err != nil {
		return Receipt{}, interpretError(err)
	}
	return r, nil
}

// ReceiptListParams asks for one page of a trip's receipts, newest first (issued_at, then id,
// both descending), or oldest first when OldestFirst is set. At most one of After and Before;
// keysets come from Receipt.Keyset. Limit must be positive.
type ReceiptListParams struct {
	TripID      string
	After       *Keyset
	Before      *Keyset
	Limit       int
	OldestFirst bool
}

// ReceiptPage is one page of receipts in list order; MoreAfter and MoreBefore as in TripPage.
type ReceiptPage struct {
	Receipts   []Receipt
	MoreAfter  bool
	MoreBefore bool
}

// ListReceipts returns one page of a trip's receipts in p's order, by keyset pagination.
func (s *Store) ListReceipts(ctx context.Context, p ReceiptListParams) (ReceiptPage, error) {
	rows := func() *gorm.DB { return s.conn(ctx).Model(&Receipt{}).Where("receipts.trip_id = ?", p.TripID) }
	page, err := byTime[Receipt](rows, "receipts.issued_at", "receipts.id",
		PageParams{After: p.After, Before: p.Before, Limit: p.Limit, OldestFirst: p.OldestFirst})
	if err != nil {
		return ReceiptPage{}, err
	}
	return ReceiptPage{Receipts: page.Items, MoreAfter: page.MoreAfter, MoreBefore: page.MoreBefore}, nil
}

// ReceiptsForPayment lists the receipts issued for a payment, oldest first.
func (s *Store) ReceiptsForPayment(ctx context.Context, paymentID string) ([]Receipt, error) {
	var rs []Receipt
	err := s.conn(ctx).Where("payment_id = ?", paymentID).Order("issued_at, id").Find(&rs).Error
	return rs, interpretError(err)
}
