package store

import (
	"context"
	"database/sql"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
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

// activeStatusList is ActiveTripStatuses as an SQL list of literals: `status IN ` +
// activeStatusList. Every statement that looks for an active trip spells the statuses out,
// never as parameters. PostgreSQL reads a driver's or a rider's active trip through the partial
// indexes on active trips (trips_active_driver_idx, trips_active_rider_idx) only when it can
// prove their predicate from the statement, and a prepared statement's generic plan, which it
// may adopt from the sixth execution on, knows nothing of its parameters: it then reads every
// trip the driver ever drove and filters them by status, for each candidate driver of a booking.
var activeStatusList = "('" + strings.Join(ActiveTripStatuses, "', '") + "')"

// activeStatus tells whether a trip in status holds its driver (ActiveTripStatuses).
func activeStatus(status string) bool { return slices.Contains(ActiveTripStatuses, status) }

// Ride types, as stored.
const (
	// RideTypeEconomy is the standard, cheapest ride.
	RideTypeEconomy = "economy"
	// RideTypeComfort is a newer, roomier car at a higher rate.
	RideTypeComfort = "comfort"
	// RideTypeXL seats up to six at the highest rate.
	RideTypeXL = "xl"
)

// Trip is one ride from booking to its final status. Driver and Rider are the trip's driver
// and rider as trips show them, read with the trip by the store's trip queries (their other
// columns are DriverByID's and RiderByID's); CreateTrip ignores them. RoutePolyline, MatchingScore, DriverPayout and
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
	Rider          TripRider  `gorm:"-"`
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

func (t *Trip) normalize() {
	normalizeTime(&t.PickupTime)
	normalizeTime(&t.CreatedAt)
	normalizeTime(&t.UpdatedAt)
	normalizeTimePtr(&t.CompletedAt)
	normalizeTimePtr(&t.CancelledAt)
}

// TripDriver is what a trip shows of its driver: the public profile (the REST DriverSummary,
// GraphQL's Driver). Trip reads join only these columns: the whole driver row was 14 of a
// trip's 38 columns, and on PostgreSQL every column costs allocations in database/sql.
type TripDriver struct {
	ID     string
	Name   string
	Rating float64
	Photo  string
	// Position is the driver's latest reported position; nil until they report one, and nil
	// for a final trip, whose reads leave it out. Only the trip's rider and admins may see it,
	// and only while the trip is active.
	Position *DriverPosition
}

// TripRider is what a trip shows of its rider: the public profile, which its driver sees while
// the trip is active. Trip reads fill Name and Rating only while it is (see activeOnly).
type TripRider struct {
	ID     string
	Name   string
	Rating float64
}

// The trip queries on the hot paths (a trip by id, a list page) read trips joined with their
// drivers (and an active trip's rider, activeOnly) through tripReadColumns and scanTripRows, not through GORM's Joins and
// reflection: GORM would rebuild the same SELECT on every call and look each joined column up
// by name in every row, which cost more than the query itself on PostgreSQL. The joins are
// inner: driver_id and rider_id are NOT NULL and reference their tables.
//
// tripReadColumns is the one description of a trip as the store reads it: each column with
// the place its value goes. The SELECT list, its length and the scan destinations all come
// from it, so a column cannot be selected without being read, or read into the wrong place.
// It leaves out the internal columns (route_polyline, matching_score, driver_payout,
// platform_cost): no view shows them, and every column is a value for PostgreSQL to format and
// for database/sql to convert, with allocations of its own. tests/trip_shape_test.go walks
// every field of Trip through a write and both read paths of the API, so a field added to
// Trip but not here (or not to the views) fails it.
var tripReadColumns = []struct {
	sql string
	to  func(r *tripRow) any
}{
	{"trips.id", func(r *tripRow) any { return &r.t.ID }},
	{"trips.account", func(r *tripRow) any { return &r.t.Account }},
	{"trips.status", func(r *tripRow) any { return &r.t.Status }},
	{"trips.ride_type", func(r *tripRow) any { return &r.t.RideType }},
	{"trips.city", func(r *tripRow) any { return &r.t.City }},
	{"trips.rider_id", func(r *tripRow) any { return &r.t.RiderID }},
	{"trips.driver_id", func(r *tripRow) any { return &r.t.DriverID }},
	{"trips.pickup_lat", func(r *tripRow) any { return &r.t.PickupLat }},
	{"trips.pickup_lng", func(r *tripRow) any { return &r.t.PickupLng }},
	{"trips.pickup_address", func(r *tripRow) any { return &r.t.PickupAddress }},
	{"trips.dropoff_lat", func(r *tripRow) any { return &r.t.DropoffLat }},
	{"trips.dropoff_lng", func(r *tripRow) any { return &r.t.DropoffLng }},
	{"trips.dropoff_address", func(r *tripRow) any { return &r.t.DropoffAddress }},
	{"trips.pickup_time", func(r *tripRow) any { return &r.t.PickupTime }},
	{"trips.fare_total", func(r *tripRow) any { return &r.t.FareTotal }},
	{"trips.fare_currency", func(r *tripRow) any { return &r.t.FareCurrency }},
	{"trips.eta_minutes", func(r *tripRow) any { return &r.t.ETAMinutes }},
	{"trips.created_at", func(r *tripRow) any { return &r.t.CreatedAt }},
	{"trips.updated_at", func(r *tripRow) any { return &r.t.UpdatedAt }},
	{"trips.completed_at", func(r *tripRow) any { return &r.t.CompletedAt }},
	{"trips.cancelled_at", func(r *tripRow) any { return &r.t.CancelledAt }},
	{"drivers.name", func(r *tripRow) any { return &r.t.Driver.Name }},
	{"drivers.rating", func(r *tripRow) any { return &r.t.Driver.Rating }},
	{"drivers.photo", func(r *tripRow) any { return &r.t.Driver.Photo }},
	{"drivers.lat", func(r *tripRow) any { return &r.lat }},
	{"drivers.lng", func(r *tripRow) any { return &r.lng }},
	{whileActive("drivers.heading"), func(r *tripRow) any { return &r.heading }},
	{whileActive("drivers.speed"), func(r *tripRow) any { return &r.speed }},
	{"drivers.position_at", func(r *tripRow) any { return &r.positionAt }},
	{activeOnly("riders.name"), func(r *tripRow) any { return &r.riderName }},
	{activeOnly("riders.rating"), func(r *tripRow) any { return &r.riderRating }},
}

// tripRow is one row being scanned: the trip, and the driver's position columns until they
// become its Driver.Position.
type tripRow struct {
	t              *Trip
	lat, lng       float64
	heading, speed *float64
	positionAt     *time.Time
	riderName      *string
	riderRating    *float64
}

// finish completes a scanned trip from what the columns alone cannot say.
func (r *tripRow) finish() {
	t := r.t
	t.Driver.ID, t.Rider.ID = t.DriverID, t.RiderID
	if r.positionAt != nil && activeStatus(t.Status) {
		t.Driver.Position = &DriverPosition{Lat: r.lat, Lng: r.lng, Heading: r.heading, Speed: r.speed, RecordedAt: r.positionAt.UTC()}
	}
	if r.riderName != nil && r.riderRating != nil {
		t.Rider.Name, t.Rider.Rating = *r.riderName, *r.riderRating
	}
	r.heading, r.speed, r.positionAt, r.riderName, r.riderRating = nil, nil, nil, nil, nil
	_ = t.AfterFind(nil) // UTC times
}

// tripWithDriverColumns is the SELECT list of tripReadColumns.
var tripWithDriverColumns = func() string {
	cols := make([]string, len(tripReadColumns))
	for i, c := range tripReadColumns {
		cols[i] = c.sql
	}
	return strings.Join(cols, ", ")
}()

const joinDrivers = `JOIN drivers ON drivers.id = trips.driver_id`

// whileActive reads expr while the trip is active, and NULL once it is final. A driver's
// position (eta_minutes, driver_location) is shown for active trips only, and a final trip's
// row leaves its driver without one (finish), which spares a page of final trips two
// allocations a row. position_at stays plain (SQLite returns a CASE over a time as text), and
// lat and lng are plain floats.
func whileActive(expr string) string {
	return `CASE WHEN trips.status IN ` + activeStatusList + ` THEN ` + expr + ` END`
}

// activeOnly reads a column of the trip's rider while the trip is active, and NULL once it is
// final: only an active trip shows its rider (to its driver), and most trips read, in pages
// above all, are final. A scalar subquery under CASE runs only for the rows that need it,
// where a join would look every row's rider up.
func activeOnly(riderColumn string) string {
	return whileActive(`(SELECT ` + riderColumn + ` FROM riders WHERE riders.id = trips.rider_id)`)
}

var (
	tripByIDSQL = `SELECT ` + tripWithDriverColumns + ` FROM trips ` + joinDrivers + ` WHERE trips.id = ? LIMIT 1`

	// tripsWithinSQL reads trips by id within reach (TripReach): of the accounts given, or
	// driven by the drivers given. A trip beyond reach costs what a missing one does: its row is
	// left out by the index scan's filter, before any join.
	tripsWithinSQL = `SELECT ` + tripWithDriverColumns + ` FROM trips ` + joinDrivers +
		` WHERE trips.id IN ? AND (trips.account IN ? OR trips.driver_id IN ?)`
)

// prebuiltSQL is the hot statements as the engine takes them, placeholders rewritten once at
// Open. GORM's Raw copies its SQL into the statement byte by byte while it looks for "?", on
// every call of the hottest read there is.
type prebuiltSQL struct {
	tripByID string
	// tripsWithin[n] reads n trips by id, each within its reader's reach (tripReads' shared
	// statements): n ids, then n accounts, then n driver ids.
	tripsWithin [tripReadBatch + 1]string
	// written holds the other statements of the writes' hot path (execSQL, rowSQL), each
	// rewritten at its first use.
	written sync.Map // SQL with "?" → the engine's SQL
	db      *gorm.DB // the root session, which rewrites them
	// direct are called after each statement that runs without GORM's processor (ranDirect),
	// as GORM's callbacks are after the others: the test tooling's (handle.OnDirect).
	direct []func(ctx context.Context, sql string, vars []any)
}

// ranDirect tells the direct observers that sql ran with vars.
func (p *prebuiltSQL) ranDirect(ctx context.Context, sql string, vars []any) {
	for _, fn := range p.direct {
		fn(ctx, sql, vars)
	}
}

// of is query with its placeholders rewritten for the engine, as GORM's Raw writes them for
// vars. query is one of the store's constant statements, with "?" placeholders only. false
// when vars hold a list GORM would expand into several placeholders (a slice other than
// []byte): then the text depends on the values, and the caller builds it as GORM does.
func (p *prebuiltSQL) of(query string, vars []any) (string, bool) {
	for _, v := range vars {
		switch v.(type) {
		case string, int, int64, float64, bool, time.Time, []byte, *string, *int, *time.Time, nil:
			continue
		}
		if k := reflect.TypeOf(v).Kind(); k == reflect.Slice || k == reflect.Array {
			return "", false
		}
	}
	if sql, ok := p.written.Load(query); ok {
		return sql.(string), true
	}
	sql := p.db.Raw(query, vars...).Statement.SQL.String()
	p.written.Store(query, sql)
	return sql, true
}

func prebuild(db *gorm.DB) *prebuiltSQL {
	p := &prebuiltSQL{tripByID: db.Raw(tripByIDSQL, "").Statement.SQL.String(), db: db}
	ids := make([]string, tripReadBatch)
	for n := 1; n <= tripReadBatch; n++ {
		p.tripsWithin[n] = db.Raw(tripsWithinSQL, ids[:n], ids[:n], ids[:n]).Statement.SQL.String()
	}
	return p
}

// withPrebuilt makes q (a query on the trips table) run a prebuilt statement through GORM
// (its callbacks and the connection or transaction of q) without building its SQL again: the
// Row callback uses a statement's SQL as it finds it.
func withPrebuilt(q *gorm.DB, sql string, vars ...any) *gorm.DB {
	q.Statement.SQL.WriteString(sql)
	q.Statement.Vars = append(q.Statement.Vars, vars...)
	return q
}

// execSQL executes query, a statement of prebuiltSQL.of's kind, without building its SQL
// again: in a transaction on PostgreSQL through pgx on the transaction's connection
// (onTxConn), elsewhere through GORM (its callbacks, and s's connection or transaction).
func (s *Store) execSQL(ctx context.Context, query string, vars ...any) execResult {
	sql, ok := s.sql.of(query, vars)
	switch {
	case !ok:
		res := s.conn(ctx).Exec(query, vars...)
		return execResult{rows: res.RowsAffected, err: res.Error}
	case s.txConn != nil:
		var tag pgconn.CommandTag
		err := s.onTx(ctx, sql, vars, func(conn *pgx.Conn) (err error) {
			tag, err = conn.Exec(ctx, sql, vars...)
			return err
		})
		return execResult{rows: tag.RowsAffected(), err: err}
	}
	q := withPrebuilt(s.conn(ctx), sql, vars...)
	res := q.Callback().Raw().Execute(q)
	return execResult{rows: res.RowsAffected, err: res.Error}
}

// execResult is what a write statement did: the rows it changed, or its error (as the
// driver gave it: interpretError names it).
type execResult struct {
	rows int64
	err  error
}

// rowSQL is query, a statement of prebuiltSQL.of's kind that returns rows, ready for
// queryRow (readRow calls it).
func (s *Store) rowSQL(ctx context.Context, query string, vars ...any) *gorm.DB {
	sql, ok := s.sql.of(query, vars)
	if !ok {
		return s.conn(ctx).Raw(query, vars...)
	}
	return withPrebuilt(s.conn(ctx), sql, vars...)
}

// withDrivers selects the trips of q (a query on the trips table) with their drivers, in
// the order scanTrips reads them.
func withDrivers(q *gorm.DB) *gorm.DB {
	// A SELECT clause of its own, not Select(string): GORM would look the whole column list
	// up as a field name (through its naming replacer) on every query.
	return q.Clauses(clause.Select{Expression: columnsThen{columns: tripWithDriverColumns}}).Joins(joinDrivers)
}

// columnsThen is a SELECT list written whole, then more of it that may carry values. GORM's
// clause.Expr writes its SQL a byte at a time while it looks for "?": for the trip's column
// list, a kilobyte, on every page read.
type columnsThen struct {
	columns string
	then    clause.Expr
}

func (c columnsThen) Build(b clause.Builder) {
	b.WriteString(c.columns)
	if c.then.SQL != "" {
		c.then.Build(b)
	}
}

// findTrips is ListTrips' page finder: the trips with their drivers and, on a page that starts
// from a keyset, the other direction's existence probe as one more column, so that a page
// deep in a list costs one round trip like the first page.
func findTrips(q *gorm.DB, other *gorm.DB, rows int) ([]Trip, bool, bool, error) {
	if other == nil {
		trips, err := readTrips(q, rows)
		return trips, false, false, err
	}
	// A scalar subquery, not EXISTS (…): PostgreSQL drops the ORDER BY and LIMIT of an EXISTS
	// subquery, and with them the index order that keeps the probe cheap at any depth.
	var found bool
	withOther := columnsThen{columns: tripWithDriverColumns, then: clause.Expr{SQL: ", (?) IS NOT NULL", Vars: []any{other}}}
	trips, err := readTrips(q.Clauses(clause.Select{Expression: withOther}), rows, &found)
	return trips, found, len(trips) > 0, err
}

// scanTrips reads every row of a query that selected tripWithDriverColumns, then one column
// per extra, and closes rows.
func scanTrips(rows *sql.Rows, err error, expected int, extra ...any) ([]Trip, error) {
	if err != nil {
		return nil, interpretError(err)
	}
	defer rows.Close()
	return scanTripRows(rows, expected, extra...)
}

// tripSource is the rows scanTripRows reads: database/sql's, or pgx's own (pgxTrips).
type tripSource interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// scanTripRows reads rows of tripReadColumns followed by one column per extra, into extra
// (the same value on every row: the last row's stays). Each row is scanned straight into its
// place in the result, which has room for expected rows, through one reused list of
// destinations: no per-row copies. The caller closes rows.
func scanTripRows(rows tripSource, expected int, extra ...any) ([]Trip, error) {
	trips := make([]Trip, 0, expected)
	dest := make([]any, len(tripReadColumns), len(tripReadColumns)+len(extra))
	dest = append(dest, extra...)
	var row tripRow
	for rows.Next() {
		trips = append(trips, Trip{})
		row.t = &trips[len(trips)-1]
		for i, c := range tripReadColumns {
			dest[i] = c.to(&row)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, interpretError(err)
		}
		row.finish()
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(err)
	}
	return trips, nil
}
