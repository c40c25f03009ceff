package store

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// panicking is a scan destination that panics, as a bug in a scan would.
type panicking struct{}

func (panicking) Scan(any) error { panic("scan failed") }

// A panic while a trip read scans its rows through pgx is the read's error, and gives the
// statement's turn at the pool back: more such reads than the pool has turns leave a read
// that works. PostgreSQL only (SQLite reads through database/sql).
func TestPgxTripReadPanicGivesTurnBack(t *testing.T) {
	st, _ := postgresStore(t, 1)
	ctx := context.Background()
	trips, err := st.ListTrips(ctx, TripListParams{Limit: 1, Filter: TripFilter{Account: DefaultAccount}})
	if err != nil || len(trips.Trips) != 1 {
		t.Fatal("no trip", err)
	}
	id := trips.Trips[0].ID

	withExtra := strings.Replace(st.sql.tripByID, " FROM trips", ", 1 FROM trips", 1)
	for range cap(st.turns.turns) + 1 {
		_, err := readTrips(withPrebuilt(st.conn(ctx).Table("trips"), withExtra, id), 1, panicking{})
		if err == nil || !strings.Contains(err.Error(), "panic") {
			t.Fatalf("a read whose scan panics: %v", err)
		}
	}
	if held := len(st.turns.turns); held != 0 {
		t.Fatalf("%d of %d turns held after the panicking reads", held, cap(st.turns.turns))
	}
	if got, err := st.TripByID(ctx, id); err != nil || got.ID != id {
		t.Fatalf("a read after them: %v", err)
	}
}

// A connection's kept scan plans follow what each statement returns: a column whose type,
// format or destination changes from one statement to the next is planned again, and a NULL
// reaches a pointer destination as nil. PostgreSQL only.
func TestKeptScanPlansFollowTheColumns(t *testing.T) {
	_, url := postgresStore(t, 1)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// scanIn runs query in mode: the simple protocol answers in text, the others in binary.
	scanIn := func(mode pgx.QueryExecMode, query string, dest ...any) {
		t.Helper()
		rows, err := conn.Query(ctx, query, mode)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		planned := plannedRows{rows, scanPlansOf(conn), conn.TypeMap()}
		if !planned.Next() {
			t.Fatalf("%s: no row: %v", query, planned.Err())
		}
		if err := planned.Scan(dest...); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	}
	scan := func(query string, dest ...any) {
		t.Helper()
		scanIn(pgx.QueryExecModeCacheStatement, query, dest...)
	}
	var s string
	var n int64
	var at time.Time
	var optional *string
	scan(`SELECT 'a'::text, 7::int8`, &s, &n)
	if s != "a" || n != 7 {
		t.Fatalf("got %q %d", s, n)
	}
	scan(`SELECT 42::int8, 'b'::text`, &n, &s) // both columns change type and destination
	if s != "b" || n != 42 {
		t.Fatalf("got %q %d", s, n)
	}
	scan(`SELECT 'c'::varchar, '2026-01-02T03:04:05Z'::timestamptz`, &optional, &at)
	if optional == nil || *optional != "c" || !at.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Fatalf("got %v %v", optional, at)
	}
	scan(`SELECT NULL::varchar, '2026-01-02T03:04:06Z'::timestamptz`, &optional, &at)
	if optional != nil || at.Second() != 6 {
		t.Fatalf("got %v %v", optional, at)
	}
	// Every nullable kind a trip has, NULL and not, and a column going from a **T to a *T.
	var optFloat *float64
	var optTime *time.Time
	var optInt *int
	scan(`SELECT 1.5::float8, '2026-01-02T03:04:07Z'::timestamptz, 9::int4`, &optFloat, &optTime, &optInt)
	if optFloat == nil || *optFloat != 1.5 || optTime == nil || optTime.Second() != 7 || optInt == nil || *optInt != 9 {
		t.Fatalf("got %v %v %v", optFloat, optTime, optInt)
	}
	first := optFloat
	scan(`SELECT NULL::float8, NULL::timestamptz, NULL::int4`, &optFloat, &optTime, &optInt)
	if optFloat != nil || optTime != nil || optInt != nil || *first != 1.5 {
		t.Fatalf("NULLs read as %v %v %v, an earlier value as %v", optFloat, optTime, optInt, *first)
	}
	scanIn(pgx.QueryExecModeSimpleProtocol, `SELECT 3.5::float8, '2026-01-02T03:04:08Z'::timestamptz, NULL::int4`,
		&optFloat, &optTime, &optInt) // in text
	if optFloat == nil || *optFloat != 3.5 || optTime == nil || !optTime.Equal(time.Date(2026, 1, 2, 3, 4, 8, 0, time.UTC)) || optInt != nil {
		t.Fatalf("got %v %v %v", optFloat, optTime, optInt)
	}
	var f float64
	scan(`SELECT 2.5::float8, 'x'::text, 3::int4`, &f, &optional, &optInt)
	if f != 2.5 || optional == nil || *optional != "x" || optInt == nil || *optInt != 3 {
		t.Fatalf("got %v %v %v", f, optional, optInt)
	}
	scan(`SELECT 'd'::text, 5::int4`, &s, &n)
	if s != "d" || n != 5 {
		t.Fatalf("got %q %d", s, n)
	}
	scan(`SELECT 'e'::text, 6::int8`, &s, &n) // the column's type alone changes: int4, then int8
	if s != "e" || n != 6 {
		t.Fatalf("got %q %d", s, n)
	}
	scanIn(pgx.QueryExecModeSimpleProtocol, `SELECT 'f'::text, 7::int8`, &s, &n) // the format alone: text
	if s != "f" || n != 7 {
		t.Fatalf("got %q %d", s, n)
	}
	scan(`SELECT 'g'::text, 8::int8`, &s, &n) // binary again
	if s != "g" || n != 8 {
		t.Fatalf("got %q %d", s, n)
	}
	if got := len(scanPlansOf(conn).columns); got != 3 {
		t.Fatalf("%d kept plans for a connection whose statements return at most 3 columns", got)
	}
}

// A transaction's single-row reads (readRow) run through pgx on the connection the
// transaction holds: inside the transaction, they see what it set, and they scan what only
// pgx can (an array into a slice, which database/sql refuses). No row is ErrNotFound, and a
// scan that panics is the read's error. PostgreSQL only.
func TestTransactionRowsReadThroughPgx(t *testing.T) {
	st, _ := postgresStore(t, 1)
	ctx := context.Background()
	err := st.WithTx(ctx, func(tx *Store) error {
		if err := tx.execSQL(ctx, `SELECT set_config('ride.probe', 'in the transaction', true)`).err; err != nil {
			return err
		}
		var setting string
		if err := tx.readRow(ctx, `SELECT current_setting('ride.probe', true)`, nil, &setting); err != nil {
			return err
		}
		if setting != "in the transaction" {
			t.Errorf("the read saw %q, not the transaction's setting", setting)
		}
		var ids []int64
		if err := tx.readRow(ctx, `SELECT ARRAY[3, 1, 2]::int8[]`, nil, &ids); err != nil {
			t.Errorf("an array into a slice: %v", err)
		} else if len(ids) != 3 || ids[0] != 3 {
			t.Errorf("an array into a slice: %v", ids)
		}
		var one int
		if err := tx.readRow(ctx, `SELECT 1 WHERE false`, nil, &one); err != ErrNotFound {
			t.Errorf("no row: %v, want ErrNotFound", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if t.Failed() {
		return // not through pgx: a panicking scan would not be caught either
	}
	err = st.WithTx(ctx, func(tx *Store) error {
		return tx.readRow(ctx, `SELECT 1`, nil, panicking{})
	})
	if err == nil || !strings.Contains(err.Error(), "panic") {
		t.Fatalf("a read whose scan panics: %v", err)
	}
	var paid bool
	if err := st.readRow(ctx, `SELECT true`, nil, &paid); err != nil || !paid {
		t.Fatalf("a read after it, on the pool: %v %v", paid, err)
	}

	// Only a transaction nothing cancels reads through its connection: database/sql rolls one
	// whose context ends back on its own, and a read on the connection would then run outside
	// it. Another account's trip is not found through the connection either, in the same
	// single statement.
	trips, err := st.ListTrips(ctx, TripListParams{Limit: 1, Filter: TripFilter{Account: DefaultAccount}})
	if err != nil || len(trips.Trips) != 1 {
		t.Fatal("no trip", err)
	}
	trip := trips.Trips[0]
	err = st.WithTx(ctx, func(tx *Store) error {
		if tx.txConn == nil {
			t.Error("a transaction on a context without Done reads through database/sql")
		}
		if _, err := tx.LockTripForPayment(ctx, "acct_other", trip.ID); err != ErrNotFound {
			t.Errorf("another account's trip: %v, want ErrNotFound", err)
		}
		locked, err := tx.LockTripForPayment(ctx, trip.Account, trip.ID)
		if err != nil || locked.ID != trip.ID || locked.FareTotal != trip.FareTotal {
			t.Errorf("the account's own trip: %+v, %v", locked, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cancellable, cancelIt := context.WithCancel(ctx)
	defer cancelIt()
	err = st.WithTx(cancellable, func(tx *Store) error {
		if tx.txConn != nil {
			t.Error("a transaction on a cancellable context reads through its connection")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// A read never reports success for a row it did not read: not on the Store of a
	// transaction that has ended, nor in one whose context was cancelled.
	var leaked *Store
	if err := st.WithTx(ctx, func(tx *Store) error { leaked = tx; return nil }); err != nil {
		t.Fatal(err)
	}
	var one int
	if err := leaked.readRow(ctx, `SELECT 1`, nil, &one); err == nil {
		t.Errorf("a read on an ended transaction succeeded, reading %d", one)
	}
	cancelled, cancel := context.WithCancel(ctx)
	err = st.WithTx(cancelled, func(tx *Store) error {
		cancel()
		return tx.readRow(cancelled, `SELECT 1`, nil, &one)
	})
	if err == nil {
		t.Errorf("a read in a cancelled transaction succeeded, reading %d", one)
	}
}
