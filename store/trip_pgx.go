package store

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"time"
	"weak"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"
	"gorm.io/gorm/callbacks"
)

// On PostgreSQL the trip reads scan their rows through pgx's own interface, on a connection
// of the pool GORM uses. database/sql converts every column of every row into a driver value
// (a string copied, a time boxed) and then again into its destination: for a page of 21
// trips of 31 columns that cost the server more than PostgreSQL spent finding them. pgx
// decodes each column from the wire straight into its destination.
//
// The statement still runs as a GORM statement: it is built, takes its turn at the pool
// (admission), and is seen by every callback registered around GORM's row callback, which
// rowQuery replaces. Only where GORM would call database/sql's QueryContext on the pool does
// it run on the pool's connection through pgx instead, sharing the statement with identical
// reads under way (shared_reads.go). A transaction's prebuilt statements, its single-row reads
// (readRow) and its writes (execSQL), run on its own connection through pgx without GORM's
// processor (onTxConn): in a transaction every callback around them (admission, standby
// positions) has nothing to do. Its other statements, a standby's and SQLite's go through
// database/sql as before.

// pgxReadSetting is the statement setting that asks rowQuery for a pgx read (a *pgxRead).
const pgxReadSetting = "ride:pgx_read"

// pgxRead is a trip read rowQuery may run through pgx, and its outcome.
type pgxRead struct {
	expected int   // rows expected, the result's initial room
	extra    []any // destinations of the columns after tripReadColumns
	ran      bool  // rowQuery ran it: trips and err are its outcome
	trips    []Trip
	err      error
}

// readTrips runs q, a query selecting tripReadColumns then one column per extra, and reads
// its trips: through pgx where rowQuery can, through database/sql otherwise.
func readTrips(q *gorm.DB, expected int, extra ...any) ([]Trip, error) {
	if q.Dialector.Name() != "postgres" {
		rows, err := q.Rows()
		return scanTrips(rows, err, expected, extra...)
	}
	read := &pgxRead{expected: expected, extra: extra}
	rows, err := q.Set(pgxReadSetting, read).Rows()
	if read.ran {
		return read.trips, interpretError(read.err)
	}
	return scanTrips(rows, err, expected, extra...)
}

// rowQuery is GORM's row callback, which runs a statement that asked for a pgx read
// (readTrips) on the pool through pgx.
func rowQuery(db *gorm.DB) {
	value, _ := db.Statement.Settings.Load(pgxReadSetting)
	read, _ := value.(*pgxRead)
	pool, onPool := db.Statement.ConnPool.(*sql.DB)
	if read == nil || !onPool || db.Error != nil {
		callbacks.RowQuery(db)
		return
	}
	callbacks.BuildQuerySQL(db)
	if db.DryRun || db.Error != nil {
		return
	}
	read.ran = true
	// The rows are scanned inside the callback, between the statement's turn at the pool and
	// its release, which GORM runs only if this returns: a panic while scanning becomes the
	// read's error, or it would keep the turn for good.
	defer func() {
		if p := recover(); p != nil {
			read.trips, read.err = nil, fmt.Errorf("store: reading trips: panic: %v", p)
			_ = db.AddError(read.err)
		}
	}()
	read.trips, read.err = shares.read(db.Statement.Context, pool, db.Statement.SQL.String(), db.Statement.Vars, read.expected, read.extra...)
	if read.err != nil {
		_ = db.AddError(read.err)
	}
	db.RowsAffected = int64(len(read.trips))
}

// onTxConn runs f on the pgx connection of conn, the connection a transaction holds:
// database/sql lets its raw driver connection be used between the transaction's statements.
// Through database/sql a statement would box every argument and column into a driver value
// and convert it again, and start a goroutine for every query of a transaction: the lock of a
// payment's trip allocated more than any other of its statements.
func onTxConn(conn *sql.Conn, f func(*pgx.Conn) error) error {
	// The outcome travels in err, never as Raw's own error: Raw closes a connection whose
	// function fails with driver.ErrBadConn or panics, and closing one a transaction holds
	// waits for the transaction to end, which waits for this statement.
	var err error
	ran := false
	rawErr := conn.Raw(func(driverConn any) error {
		ran = true
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("store: a statement on a transaction's connection: panic: %v", p)
			}
		}()
		c, ok := driverConn.(*stdlib.Conn)
		if !ok {
			err = fmt.Errorf("store: a pgx statement on a %T connection", driverConn)
			return nil
		}
		err = f(c.Conn())
		return nil
	})
	if !ran {
		return rawErr // the connection is gone (sql.ErrConnDone): nothing ran
	}
	return err
}

// onTx runs f, a prebuilt statement sql with vars, on the transaction's connection through pgx
// (onTxConn), and tells the direct observers it ran (prebuiltSQL.ranDirect): GORM's callbacks
// never see it.
func (s *Store) onTx(ctx context.Context, sql string, vars []any, f func(*pgx.Conn) error) error {
	err := onTxConn(s.txConn, f)
	s.sql.ranDirect(ctx, sql, vars)
	return err
}

// scanOneRow runs query on conn and scans its first row into dest; ErrNotFound when it
// returns none.
func scanOneRow(ctx context.Context, conn *pgx.Conn, query string, vars, dest []any) error {
	rows, err := conn.Query(ctx, query, vars...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return ErrNotFound
	}
	if err := (plannedRows{rows, scanPlansOf(conn), conn.TypeMap()}).Scan(dest...); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

// pgxTrips runs query on a connection of pool through pgx and scans its trips.
func pgxTrips(ctx context.Context, pool *sql.DB, query string, vars []any, expected int, extra ...any) (trips []Trip, err error) {
	conn, err := poolConn(ctx, pool)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	err = conn.Raw(func(driverConn any) error {
		c, ok := driverConn.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("store: a pgx read on a %T connection", driverConn)
		}
		conn := c.Conn()
		rows, err := conn.Query(ctx, query, vars...)
		if err != nil {
			return err
		}
		defer rows.Close()
		trips, err = scanTripRows(plannedRows{rows, scanPlansOf(conn), conn.TypeMap()}, expected, extra...)
		return err
	})
	return trips, err
}

// poolConn takes a connection of pool for a statement bounded by ctx (WithDeadline). The turn
// the statement holds (admission) leaves a connection for it, but one the pool is still
// opening in the background, to replace a connection a stalled statement lost, is opened
// without the statement's bound: waiting for it, a statement that took its turn just before
// its bound would wait out the connection's read timeout. So the wait for a connection ends
// at the bound, with a statement's grace; the statement itself runs on ctx.
func poolConn(ctx context.Context, pool *sql.DB) (*sql.Conn, error) {
	bound := graceOf(ctx)
	if bound == 0 {
		return pool.Conn(ctx)
	}
	wait, cancel := context.WithDeadline(ctx, time.Unix(0, bound))
	defer cancel()
	conn, err := pool.Conn(wait)
	if err != nil && wait.Err() != nil {
		return nil, errNotAdmitted{context.DeadlineExceeded}
	}
	return conn, err
}

// registerRowQuery puts rowQuery in the place of GORM's row callback.
func registerRowQuery(db *gorm.DB) error {
	if err := db.Callback().Row().Replace("gorm:row", rowQuery); err != nil {
		return fmt.Errorf("store: hook gorm:row: %w", err)
	}
	return nil
}

// pgx plans how to decode each column into its destination anew for every statement: for a
// trip's 31 columns about 25 allocations of a read by id, more than the row's own values.
// The plans of a connection are kept between its statements instead, with the column's type,
// format and destination type they were made for, and remade for a column where one of those
// differs. They are only used while the connection is held, so never by two statements at
// once, and with the connection's own type map, which made them.

// scanPlans are one connection's plans, by column.
type scanPlans struct {
	columns []columnPlan
}

type columnPlan struct {
	oid    uint32
	format int16
	target reflect.Type
	plan   pgtype.ScanPlan
}

// connScanPlans holds the plans of every live connection, by a weak pointer to it: a
// connection closed and collected takes its entry along.
var connScanPlans sync.Map // weak.Pointer[pgx.Conn] → *scanPlans

func scanPlansOf(conn *pgx.Conn) *scanPlans {
	key := weak.Make(conn)
	if p, ok := connScanPlans.Load(key); ok {
		return p.(*scanPlans)
	}
	p := &scanPlans{}
	connScanPlans.Store(key, p)
	runtime.AddCleanup(conn, func(key weak.Pointer[pgx.Conn]) { connScanPlans.Delete(key) }, key)
	return p
}

// plannedRows scans pgx rows with the connection's kept plans, as pgx.Rows.Scan does with
// plans of its own.
type plannedRows struct {
	pgx.Rows
	plans *scanPlans
	types *pgtype.Map
}

func (r plannedRows) Scan(dest ...any) error {
	fields, values := r.FieldDescriptions(), r.RawValues()
	if len(fields) != len(dest) || len(values) != len(dest) {
		return fmt.Errorf("store: %d columns, %d values and %d destinations", len(fields), len(values), len(dest))
	}
	if len(r.plans.columns) < len(dest) {
		r.plans.columns = append(r.plans.columns, make([]columnPlan, len(dest)-len(r.plans.columns))...)
	}
	for i, d := range dest {
		f, c := &fields[i], &r.plans.columns[i]
		var err error
		switch d := d.(type) {
		case **string:
			err = scanNullable(r, c, f, values[i], d)
		case **float64:
			err = scanNullable(r, c, f, values[i], d)
		case **time.Time:
			err = scanNullable(r, c, f, values[i], d)
		case **int:
			err = scanNullable(r, c, f, values[i], d)
		default:
			err = r.scan(c, f, values[i], d)
		}
		if err != nil {
			return pgx.ScanArgError{ColumnIndex: i, FieldName: f.Name, Err: err}
		}
	}
	return nil
}

// scan scans one column's value into d with the column's kept plan, planned again when the
// column's type, format or destination changed.
func (r plannedRows) scan(c *columnPlan, f *pgconn.FieldDescription, value []byte, d any) error {
	if target := reflect.TypeOf(d); c.plan == nil || c.oid != f.DataTypeOID || c.format != f.Format || c.target != target {
		*c = columnPlan{oid: f.DataTypeOID, format: f.Format, target: target, plan: r.types.PlanScan(f.DataTypeOID, f.Format, d)}
	}
	return c.plan.Scan(value, d)
}

// scanNullable scans a nullable column into *d: nil for NULL, else a new T. pgx's own plan
// for a **T does the same through reflection, which cost a page of trips (a dozen nullable
// columns a row) more than all its other columns; this scans the value with the plan of a
// *T, the one a NOT NULL column of the same type keeps.
func scanNullable[T any](r plannedRows, c *columnPlan, f *pgconn.FieldDescription, value []byte, d **T) error {
	if value == nil {
		*d = nil
		return nil
	}
	v := new(T)
	if err := r.scan(c, f, value, v); err != nil {
		return err
	}
	*d = v
	return nil
}
