package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// CreateTrip inserts a trip and returns it as stored (timestamps filled in when zero). The
// Driver field is ignored: the trip refers to DriverID. An empty Account is the rider's (one
// more read: booking names it). ErrDuplicate when the id exists; ErrInvalidReference when the
// city, rider or driver does not exist. An active trip whose rider or driver already has one
// is refused by the database: ErrRiderHasActiveTrip or ErrDriverHasActiveTrip.
func (s *Store) CreateTrip(ctx context.Context, t Trip) (Trip, error) {
	if t.Account == "" {
		r, err := s.RiderByID(ctx, t.RiderID)
		if errors.Is(err, ErrNotFound) {
			return Trip{}, ErrInvalidReference
		} else if err != nil {
			return Trip{}, err
		}
		t.Account = r.Account
	}
	for attempt := 1; ; attempt++ {
		err := s.insertTrip(ctx, &t)
		if !errors.Is(err, ErrDuplicate) || !activeStatus(t.Status) {
			if err != nil {
				return Trip{}, err
			}
			return t, nil
		}
		if tripConflictHold != nil {
			tripConflictHold()
		}
		if conflict := s.activeTripConflict(ctx, t, err); conflict != nil {
			return Trip{}, conflict
		}
		// Nothing refuses the trip any more: the rider's or driver's active trip that did
		// ended in between. Insert it again, as if it had come a moment later.
		if attempt == activeTripInsertAttempts {
			return Trip{}, err
		}
	}
}

// activeTripInsertAttempts bounds the inserts of one active trip whose refusal each time
// names no trip (activeTripConflict): each needs another trip of the same rider or driver to
// end between the insert and the look.
const activeTripInsertAttempts = 3

// tripConflictHold, when set (by specs), runs after an active trip's insert was refused,
// before activeTripConflict looks for what refused it.
var tripConflictHold func()

// tripColumns are the columns a trip is inserted with, in the order of Trip.insertValues.
const tripColumns = `id, account, status, ride_type, city, rider_id, driver_id, pickup_lat, pickup_lng,
    pickup_address, dropoff_lat, dropoff_lng, dropoff_address, pickup_time, fare_total, fare_currency,
    eta_minutes, created_at, updated_at, completed_at, cancelled_at, route_polyline, matching_score,
    driver_payout, platform_cost`

// insertTripSQL writes a trip, or nothing when the trip breaks a unique index (its id, or the
// one active trip of its rider or driver): a refusal that does not fail the statement, so the
// caller's transaction goes on (on PostgreSQL a failed statement aborts it) and asks which
// index it was (activeTripConflict). Every booking runs it: it is written out, as the inserts
// of store/inserts.go are.
const insertTripSQL = `INSERT INTO trips (` + tripColumns + `)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`

func (t *Trip) insertValues() []any {
	t.normalize()
	return []any{t.ID, t.Account, t.Status, t.RideType, t.City, t.RiderID, t.DriverID, t.PickupLat, t.PickupLng,
		t.PickupAddress, t.DropoffLat, t.DropoffLng, t.DropoffAddress, t.PickupTime, t.FareTotal, t.FareCurrency,
		t.ETAMinutes, t.CreatedAt, t.UpdatedAt, t.CompletedAt, t.CancelledAt, t.RoutePolyline, t.MatchingScore,
		t.DriverPayout, t.PlatformCost}
}

// insertTrip writes t, stamping a zero CreatedAt and UpdatedAt with the store's clock as GORM
// did. ErrDuplicate when a unique index refused it.
func (s *Store) insertTrip(ctx context.Context, t *Trip) error {
	now := s.db.NowFunc()
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now
	}
	if t.UpdatedAt.IsZero() {
		t.UpdatedAt = now
	}
	return changedRows(s.execSQL(ctx, insertTripSQL, t.insertValues()...), ErrDuplicate)
}

// activeTripConflict names the unique index an active trip's insert broke. The engines report
// it differently (a constraint name, a column list) and GORM's translation drops it, so it is
// found again by asking: a repeated id is a plain duplicate (cause); otherwise the rider, then
// the driver, already has an active trip (the rider first, as booking checks it first). nil
// when none of them holds any more: the trip that refused the insert has ended since.
func (s *Store) activeTripConflict(ctx context.Context, t Trip, cause error) error {
	checks := []struct {
		where string
		arg   string
		err   error
	}{
		{"id = ?", t.ID, nil},
		{"rider_id = ? AND status IN " + activeStatusList, t.RiderID, ErrRiderHasActiveTrip},
		{"driver_id = ? AND status IN " + activeStatusList, t.DriverID, ErrDriverHasActiveTrip},
	}
	for _, c := range checks {
		var found []int
		if err := s.conn(ctx).Model(&Trip{}).Select("1").Where(c.where, c.arg).Limit(1).Scan(&found).Error; err != nil {
			return errors.Join(cause, interpretError(err))
		}
		if len(found) > 0 {
			if c.err == nil {
				return cause
			}
			return fmt.Errorf("%w: %w", c.err, cause)
		}
	}
	return nil
}

// TripByID returns one trip with its driver, in one query, or ErrNotFound. It is the service's
// own read, for any trip; a caller's read is TripWithin.
func (s *Store) TripByID(ctx context.Context, id string) (Trip, error) {
	return s.oneTrip(ctx, s.sql.tripByID, []any{id})
}

// TripReach is what a caller may know exists, as a trip read bounds it: the trips of Account
// and those DriverID drives. An empty member reaches nothing.
type TripReach struct {
	Account  string
	DriverID string
}

// has reports whether t is within reach.
func (r TripReach) has(t *Trip) bool {
	return (r.Account != "" && t.Account == r.Account) || (r.DriverID != "" && t.DriverID == r.DriverID)
}

// TripWithin returns the trip with id when it is within reach, with its driver, in one query;
// otherwise ErrNotFound, whether no trip has that id or it is beyond reach: both cost the same
// statement and the same work, so neither answer nor timing tells them apart. Outside a
// transaction, concurrent calls share statements (see tripReads).
func (s *Store) TripWithin(ctx context.Context, id string, reach TripReach) (Trip, error) {
	if s.reads != nil {
		return s.reads.read(ctx, id, reach)
	}
	return s.oneTrip(ctx, s.sql.tripsWithin[1], []any{id, reach.Account, reach.DriverID})
}

// oneTrip runs a prebuilt statement that selects at most one trip with its driver, then one
// column per extra (tripsByPrebuilt): the trip, or ErrNotFound.
func (s *Store) oneTrip(ctx context.Context, statement string, vars []any, extra ...any) (Trip, error) {
	trips, err := s.tripsByPrebuilt(ctx, statement, vars, extra...)
	if err != nil {
		return Trip{}, err
	}
	if len(trips) == 0 {
		return Trip{}, ErrNotFound
	}
	return trips[0], nil
}

// tripsByPrebuilt runs a prebuilt statement that selects tripWithDriverColumns, then one column
// per extra (readTrips). Table names the table for callbacks that look (query logs);
// withPrebuilt fills in the statement conn made.
func (s *Store) tripsByPrebuilt(ctx context.Context, statement string, vars []any, extra ...any) ([]Trip, error) {
	return readTrips(withPrebuilt(s.conn(ctx).Table("trips"), statement, vars...), 1, extra...)
}

// TripsWithin returns the trips among ids that are within reach, each with its driver, in one
// query and in no particular order. Ids that name no trip, or one beyond reach, are simply
// absent from the result.
func (s *Store) TripsWithin(ctx context.Context, ids []string, reach TripReach) ([]Trip, error) {
	switch len(ids) {
	case 0:
		return nil, nil
	case 1: // a GraphQL document asking for one trip, the usual case: TripWithin
		trip, err := s.TripWithin(ctx, ids[0], reach)
		if errors.Is(err, ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return []Trip{trip}, nil
	}
	return readTrips(withDrivers(s.conn(ctx).Model(&Trip{})).
		Where("trips.id IN ? AND (trips.account = ? OR trips.driver_id = ?)", ids, reach.Account, reach.DriverID), len(ids))
}

// SortField names a column trips can be listed by.
type SortField string

// The sortable fields of a trip list.
const (
	// SortCreatedAt sorts by booking time.
	SortCreatedAt SortField = "created_at"
	// SortPickupTime sorts by (expected or actual) pickup time.
	SortPickupTime SortField = "pickup_time"
	// SortFare sorts by the fare's amount in minor units (column fare_total). Amounts of
	// different currencies compare as plain numbers.
	SortFare SortField = "fare"
)

// column is the trips column behind a sort field, and whether its keyset value is a time.
func (f SortField) column() (name string, isTime bool, ok bool) {
	switch f {
	case SortCreatedAt:
		return "created_at", true, true
	case SortPickupTime:
		return "pickup_time", true, true
	case SortFare:
		return "fare_total", false, true
	}
	return "", false, false
}

// SortKey is one key of a list order.
type SortKey struct {
	Field SortField
	Desc  bool
}

// DefaultTripSort is the order of a trip list that names none: newest first.
var DefaultTripSort = []SortKey{{Field: SortCreatedAt, Desc: true}}

// TripFilter narrows a trip list. Empty strings and nil times filter nothing; the time bounds
// are exclusive. Account confines the list to one tenant's trips; only a driver's own list
// (the shared fleet) leaves it empty.
type TripFilter struct {
	Account         string
	Status          string
	City            string
	DriverID        string
	RiderID         string
	CreatedAfter    *time.Time
	CreatedBefore   *time.Time
	PickupTimeAfter *time.Time
}

// Keyset is a position in a trip list: the sort values of one trip, one per SortKey
// (created_at and pickup_time as Unix microseconds, fare as fare_total), and its id. It is what
// a cursor carries; it need not name a trip that still exists.
type Keyset struct {
	Values []int64
	ID     string
}

// TripListParams asks for one page of trips. At most one of After and Before may be set: After
// pages forward from a position, Before pages backward from it (still returning the trips in
// the list's order). Sort empty means DefaultTripSort. Limit must be positive.
type TripListParams struct {
	Filter TripFilter
	Sort   []SortKey
	After  *Keyset
	Before *Keyset
	Limit  int
}

// TripPage is one page of trips in list order, each with its driver. MoreAfter tells whether
// trips follow the page's last one; MoreBefore whether trips precede its first one (exactly,
// not a guess: each is either observed by fetching one row beyond the limit or checked with
// one existence query).
type TripPage struct {
	Trips      []Trip
	MoreAfter  bool
	MoreBefore bool
}

// ErrInvalidListParams marks TripListParams the store cannot run (both After and Before, an
// unknown or repeated sort field, a keyset of the wrong length, a limit below one). Callers
// validate input first, so this signals a bug, not a client error.
var ErrInvalidListParams = errors.New("store: invalid list parameters")

// Keyset returns the trip's position in a list sorted by sort (DefaultTripSort when empty),
// for building cursors. Unknown sort fields contribute 0.
func (t Trip) Keyset(sort []SortKey) Keyset {
	if len(sort) == 0 {
		sort = DefaultTripSort
	}
	ks := Keyset{Values: make([]int64, len(sort)), ID: t.ID}
	for i, k := range sort {
		switch k.Field {
		case SortCreatedAt:
			ks.Values[i] = t.CreatedAt.UnixMicro()
		case SortPickupTime:
			ks.Values[i] = t.PickupTime.UnixMicro()
		case SortFare:
			ks.Values[i] = t.FareTotal
		}
	}
	return ks
}

// orderKey is one resolved column of a list order, the id tiebreaker included.
type orderKey struct {
	column string // qualified, e.g. "trips.created_at"
	desc   bool
}

// ListTrips returns one page of trips by keyset pagination: no OFFSET, so a page costs the
// same at any depth, and inserts or deletes elsewhere never make a walk skip or repeat a trip.
//
// The order is the sort keys, then id in the first key's direction. A page costs one query
// (trips joined with their drivers, Limit+1 rows to learn whether more follow) plus, when the
// page starts from a keyset, one `SELECT 1 … LIMIT 1` for the other direction.
func (s *Store) ListTrips(ctx context.Context, p TripListParams) (TripPage, error) {
	keys, from, backward, err := resolveListParams(p)
	if err != nil {
		return TripPage{}, err
	}
	trips, after, before, err := keysetPage(
		withDrivers(s.filteredTrips(ctx, p.Filter)), s.filteredTrips(ctx, p.Filter),
		keys, from, backward, p.Limit, findTrips)
	if err != nil {
		return TripPage{}, err
	}
	return TripPage{Trips: trips, MoreAfter: after, MoreBefore: before}, nil
}

// keysetArgs is a resolved keyset: one comparison value per order key, id last.
type keysetArgs []any

// resolveListParams checks p and turns its sort and keyset into columns and query values.
func resolveListParams(p TripListParams) (keys []orderKey, from keysetArgs, backward bool, err error) {
	if p.After != nil && p.Before != nil {
		return nil, nil, false, fmt.Errorf("%w: both After and Before", ErrInvalidListParams)
	}
	if p.Limit < 1 {
		return nil, nil, false, fmt.Errorf("%w: limit %d", ErrInvalidListParams, p.Limit)
	}
	sort := p.Sort
	if len(sort) == 0 {
		sort = DefaultTripSort
	}
	ks := p.After
	if p.Before != nil {
		ks, backward = p.Before, true
	}
	if ks != nil {
		if len(ks.Values) != len(sort) {
			return nil, nil, false, fmt.Errorf("%w: keyset has %d values for %d sort keys",
				ErrInvalidListParams, len(ks.Values), len(sort))
		}
		from = make(keysetArgs, 0, len(sort)+1)
	}
	seen := make(map[SortField]bool, len(sort))
	for i, k := range sort {
		col, isTime, ok := k.Field.column()
		if !ok {
			return nil, nil, false, fmt.Errorf("%w: unknown sort field %q", ErrInvalidListParams, k.Field)
		}
		if seen[k.Field] {
			return nil, nil, false, fmt.Errorf("%w: sort field %q repeated", ErrInvalidListParams, k.Field)
		}
		seen[k.Field] = true
		keys = append(keys, orderKey{column: "trips." + col, desc: k.Desc})
		if ks != nil {
			if isTime {
				// Compare as the same UTC, microsecond time the column holds; on SQLite the
				// driver writes it as text in exactly the stored format.
				from = append(from, time.UnixMicro(ks.Values[i]).UTC())
			} else {
				from = append(from, ks.Values[i])
			}
		}
	}
	keys = append(keys, orderKey{column: "trips.id", desc: sort[0].Desc})
	if ks != nil {
		from = append(from, ks.ID)
	}
	return keys, from, backward, nil
}

// keysetCondition selects the trips after the keyset in walk order (forward) or before it
// (!forward), excluding or including the keyset's own position.
//
// When every key runs the same way it is one row-value comparison, `(a, b, id) > (?, ?, ?)`,
// which both engines support and PostgreSQL turns into an index range. Mixed directions expand
// to `a > ? OR (a = ? AND (b < ? OR (b = ? AND id > ?)))`.
func keysetCondition(keys []orderKey, values keysetArgs, forward, inclusive bool) clause.Expr {
	// op is the comparison that moves in the wanted direction along key k.
	op := func(k orderKey, last bool) string {
		greater := k.desc != forward // ascending & forward, or descending & backward
		o := "<"
		if greater {
			o = ">"
		}
		if last && inclusive {
			o += "="
		}
		return o
	}

	uniform := true
	for _, k := range keys[1:] {
		if k.desc != keys[0].desc {
			uniform = false
		}
	}
	if uniform {
		cols := make([]string, len(keys))
		marks := make([]string, len(keys))
		for i, k := range keys {
			cols[i], marks[i] = k.column, "?"
		}
		sql := fmt.Sprintf("(%s) %s (%s)",
			strings.Join(cols, ", "), op(keys[0], true), strings.Join(marks, ", "))
		return clause.Expr{SQL: sql, Vars: values}
	}

	// Build from the innermost (id) outwards.
	last := len(keys) - 1
	sql := fmt.Sprintf("%s %s ?", keys[last].column, op(keys[last], true))
	vars := []any{values[last]}
	for i := last - 1; i >= 0; i-- {
		k := keys[i]
		sql = fmt.Sprintf("%s %s ? OR (%s = ? AND (%s))", k.column, op(k, false), k.column, sql)
		vars = append([]any{values[i], values[i]}, vars...)
	}
	return clause.Expr{SQL: "(" + sql + ")", Vars: vars}
}

// filteredTrips starts a trips query with the filter's conditions.
func (s *Store) filteredTrips(ctx context.Context, f TripFilter) *gorm.DB {
	q := s.conn(ctx).Model(&Trip{})
	if f.Account != "" {
		q = q.Where("trips.account = ?", f.Account)
	}
	if f.Status != "" {
		q = q.Where("trips.status = ?", f.Status)
	}
	if f.City != "" {
		q = q.Where("trips.city = ?", f.City)
	}
	if f.DriverID != "" {
		q = q.Where("trips.driver_id = ?", f.DriverID)
	}
	if f.RiderID != "" {
		q = q.Where("trips.rider_id = ?", f.RiderID)
	}
	if f.CreatedAfter != nil {
		q = q.Where("trips.created_at > ?", floorMicro(*f.CreatedAfter))
	}
	if f.CreatedBefore != nil {
		q = q.Where("trips.created_at < ?", ceilMicro(*f.CreatedBefore))
	}
	if f.PickupTimeAfter != nil {
		q = q.Where("trips.pickup_time > ?", floorMicro(*f.PickupTimeAfter))
	}
	return q
}

// Stored times are whole microseconds, so an exclusive bound with finer digits is rounded to
// the microsecond that keeps the comparison exact: x > t ⇔ x > floor(t), and x < t ⇔ x < ceil(t).
// (pgx would otherwise truncate a PostgreSQL parameter, turning "< t" into "< floor(t)".)

// floorMicro is t in UTC rounded down to the microsecond.
func floorMicro(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}

// ceilMicro is t in UTC rounded up to the microsecond.
func ceilMicro(t time.Time) time.Time {
	f := floorMicro(t)
	if f.Before(t) {
		return f.Add(time.Microsecond)
	}
	return f
}
