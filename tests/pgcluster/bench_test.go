package pgcluster_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rideapi/ride/tests/pgcluster"
)

// benchRows is the size of the benchmarks' table: enough for a realistic index, quick to load.
const benchRows = 100_000

// The benchmarks' statements: a trip-shaped row by its key, and a page of 20 of an account's
// newest, as the API's hottest reads are.
const (
	byIDSQL = `SELECT id, account, status, ride_type, city, rider_id, driver_id, pickup_lat, pickup_lng,
		pickup_address, dropoff_lat, dropoff_lng, dropoff_address, fare_total, fare_currency, eta_minutes,
		created_at, updated_at, completed_at, cancelled_at FROM bench_trips WHERE id = $1`
	pageSQL = `SELECT id, account, status, ride_type, city, rider_id, driver_id, pickup_lat, pickup_lng,
		pickup_address, dropoff_lat, dropoff_lng, dropoff_address, fare_total, fare_currency, eta_minutes,
		created_at, updated_at, completed_at, cancelled_at FROM bench_trips WHERE account = $1
		ORDER BY created_at DESC, id DESC LIMIT 20`
)

// createDatabase creates the database name on t's primary.
func createDatabase(ctx context.Context, t *pgcluster.Topology, name string) error {
	admin, err := pgx.Connect(ctx, t.PrimaryURL("postgres"))
	if err != nil {
		return err
	}
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, "CREATE DATABASE "+name)
	return err
}

var benchDB struct {
	once sync.Once
	name string
	err  error
}

// benchDatabase loads the benchmarks' table into a database of the shared topology, once, and
// waits until the standby has it too.
func benchDatabase(b *testing.B, t *pgcluster.Topology) string {
	b.Helper()
	benchDB.once.Do(func() {
		ctx := context.Background()
		benchDB.name = "bench"
		if benchDB.err = createDatabase(ctx, t, benchDB.name); benchDB.err != nil {
			return
		}
		conn, err := pgx.Connect(ctx, t.PrimaryURL(benchDB.name))
		if err != nil {
			benchDB.err = err
			return
		}
		defer conn.Close(ctx)
		_, benchDB.err = conn.Exec(ctx, fmt.Sprintf(`
CREATE TABLE bench_trips (
	id text PRIMARY KEY, account text NOT NULL, status text NOT NULL, ride_type text NOT NULL,
	city text NOT NULL, rider_id text NOT NULL, driver_id text, pickup_lat float8 NOT NULL,
	pickup_lng float8 NOT NULL, pickup_address text, dropoff_lat float8 NOT NULL,
	dropoff_lng float8 NOT NULL, dropoff_address text, fare_total bigint NOT NULL,
	fare_currency text NOT NULL, eta_minutes int, created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL, completed_at timestamptz, cancelled_at timestamptz);
INSERT INTO bench_trips
SELECT 'trp_' || i, 'acct_' || (i %% 100), 'completed', 'standard', 'london', 'rdr_' || (i %% 5000),
	'drv_' || (i %% 700), 51.5 + i / 1e7, -0.12, i || ' Baker Street', 51.52, -0.1, NULL, 1000 + i %% 500,
	'gbp', NULL, now() - i * interval '1 minute', now() - i * interval '1 minute',
	now() - i * interval '1 minute', NULL
FROM generate_series(1, %d) AS i;
CREATE INDEX bench_trips_account ON bench_trips (account, created_at DESC, id DESC);
ANALYZE bench_trips;`, benchRows))
		if benchDB.err == nil {
			benchDB.err = t.CaughtUp(ctx)
		}
	})
	if benchDB.err != nil {
		b.Fatal(benchDB.err)
	}
	return benchDB.name
}

// measure runs query b.N times on one connection to url and reports, besides the time of a
// round trip, the processor time it cost the servers named in costs, per statement.
func measure(b *testing.B, t *pgcluster.Topology, url string, costs []pgcluster.Server, query func(conn *pgx.Conn, i int) error) {
	b.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	for i := range 100 { // warm: connection, caches, PgBouncer's server connection
		if err := query(conn, i); err != nil {
			b.Fatal(err)
		}
	}
	before := make([]time.Duration, len(costs))
	for i, s := range costs {
		if before[i], err = t.CPU(s); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := query(conn, i); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	for i, s := range costs {
		after, err := t.CPU(s)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(after-before[i])/float64(time.Microsecond)/float64(b.N), string(s)+"-µs/op")
	}
}

func scanOne(conn *pgx.Conn, sql string, args ...any) error {
	rows, err := conn.Query(context.Background(), sql, args...)
	if err != nil {
		return err
	}
	for rows.Next() {
	}
	return rows.Err()
}

// BenchmarkPositions measures what reading a server's WAL position costs, beside a statement
// that does nothing and a read of a row by its key: the primary's position after a write
// (pg_current_wal_lsn, pg_current_wal_insert_lsn) and the standby's replay position and the
// commit time of the last transaction it replayed.
//
//	go test -run XXX -bench Positions ./tests/pgcluster/
func BenchmarkPositions(b *testing.B) {
	t := benchTopology(b)
	db := benchDatabase(b, t)
	for _, c := range []struct {
		name   string
		server pgcluster.Server
		sql    string
		args   bool
	}{
		{"primary/SELECT_1", pgcluster.Primary, "SELECT 1", false},
		{"primary/pg_current_wal_lsn", pgcluster.Primary, "SELECT pg_current_wal_lsn()", false},
		{"primary/pg_current_wal_insert_lsn", pgcluster.Primary, "SELECT pg_current_wal_insert_lsn()", false},
		{"primary/row_by_id", pgcluster.Primary, byIDSQL, true},
		{"standby/SELECT_1", pgcluster.Standby, "SELECT 1", false},
		{"standby/pg_last_wal_replay_lsn", pgcluster.Standby, "SELECT pg_last_wal_replay_lsn()", false},
		{"standby/pg_last_xact_replay_timestamp", pgcluster.Standby, "SELECT pg_last_xact_replay_timestamp()", false},
		{"standby/both", pgcluster.Standby, "SELECT pg_last_wal_replay_lsn(), pg_last_xact_replay_timestamp()", false},
		{"standby/row_by_id", pgcluster.Standby, byIDSQL, true},
		{"standby/row_by_id_with_replay_lsn", pgcluster.Standby, "SELECT t.*, pg_last_wal_replay_lsn() FROM (" + byIDSQL + ") t", true},
	} {
		b.Run(c.name, func(b *testing.B) {
			url := t.PrimaryURL(db)
			if c.server == pgcluster.Standby {
				url = t.StandbyURL(db)
			}
			measure(b, t, withMode(url, "exec"), []pgcluster.Server{c.server}, func(conn *pgx.Conn, i int) error {
				if c.args {
					return scanOne(conn, c.sql, fmt.Sprintf("trp_%d", 1+i*7919%benchRows))
				}
				return scanOne(conn, c.sql)
			})
		})
	}
}

// BenchmarkPositionCalls measures what the position functions cost inside the server, apart
// from the cost of a statement: each statement calls its function 100,000 times, and
// SERVER-ns/call is the server's processor time divided by that; the row "count" calls none, for the difference. Each statement
// takes milliseconds: run it with a count of statements, such as -benchtime 100x.
//
//	go test -run XXX -bench PositionCalls -benchtime 100x ./tests/pgcluster/
func BenchmarkPositionCalls(b *testing.B) {
	t := benchTopology(b)
	const calls = 100_000
	for _, c := range []struct {
		name, call string
		server     pgcluster.Server
	}{
		{"primary/count", "1", pgcluster.Primary},
		{"primary/pg_current_wal_lsn", "pg_current_wal_lsn()", pgcluster.Primary},
		{"primary/pg_current_wal_insert_lsn", "pg_current_wal_insert_lsn()", pgcluster.Primary},
		{"standby/count", "1", pgcluster.Standby},
		{"standby/pg_last_wal_replay_lsn", "pg_last_wal_replay_lsn()", pgcluster.Standby},
		{"standby/pg_last_xact_replay_timestamp", "pg_last_xact_replay_timestamp()", pgcluster.Standby},
	} {
		b.Run(c.name, func(b *testing.B) {
			url := t.PrimaryURL("postgres")
			if c.server == pgcluster.Standby {
				url = t.StandbyURL("postgres")
			}
			query := fmt.Sprintf("SELECT count(%s) FROM generate_series(1, %d)", c.call, calls)
			before, err := t.CPU(c.server)
			if err != nil {
				b.Fatal(err)
			}
			measure(b, t, withMode(url, "exec"), nil, func(conn *pgx.Conn, _ int) error { return scanOne(conn, query) })
			after, err := t.CPU(c.server)
			if err != nil {
				b.Fatal(err)
			}
			// The server's processor time, not the wall clock: on a busy host the two differ.
			b.ReportMetric(float64(after-before)/float64(b.N)/calls, string(c.server)+"-ns/call")
		})
	}
}

// BenchmarkExecModes measures each of pgx's ways of running a statement, directly on the
// primary and through PgBouncer: the round trip and what it costs the primary and PgBouncer.
// The statement cache (cache_statement) breaks through PgBouncer in transaction pooling as soon
// as two clients share a server connection, and describe_exec as soon as another client's
// statement comes between its two round trips (see the specs); one client alone, as here,
// meets neither, so their figures through PgBouncer are for comparison only.
//
//	go test -run XXX -bench ExecModes ./tests/pgcluster/
func BenchmarkExecModes(b *testing.B) {
	t := benchTopology(b)
	db := benchDatabase(b, t)
	for _, route := range []string{"direct", "pgbouncer"} {
		for _, mode := range []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"} {
			for _, q := range []struct{ name, sql string }{{"by_id", byIDSQL}, {"page", pageSQL}} {
				b.Run(route+"/"+mode+"/"+q.name, func(b *testing.B) {
					if route == "pgbouncer" && mode == "cache_statement" {
						// Even one client alone meets its own statements of a previous run on
						// PgBouncer's server connections.
						b.Skip("the statement cache does not work through PgBouncer in transaction pooling")
					}
					url, costs := t.PrimaryURL(db), []pgcluster.Server{pgcluster.Primary}
					if route == "pgbouncer" {
						url, costs = t.BouncerURL(db), []pgcluster.Server{pgcluster.Primary, pgcluster.Bouncer}
					}
					measure(b, t, withMode(url, mode), costs, func(conn *pgx.Conn, i int) error {
						if q.name == "page" {
							return scanOne(conn, q.sql, fmt.Sprintf("acct_%d", i%100))
						}
						return scanOne(conn, q.sql, fmt.Sprintf("trp_%d", 1+i*7919%benchRows))
					})
				})
			}
		}
	}
}

// BenchmarkReadYourWrite measures a write followed by a read of what it wrote: read on the
// primary, or on a standby once it has replayed the write (the primary's WAL insert position
// after the commit, compared with the standby's replay position before the read).
// The standby here applies WAL as soon as it can, as a standby without a deliberate delay does,
// so the difference is the wait a read-your-writes read pays on a standby that keeps up.
// polls/op counts the times the standby had not replayed the write yet when asked, and
// wait-µs/op the time from the write's commit until it had.
//
//	go test -run XXX -bench ReadYourWrite ./tests/pgcluster/
func BenchmarkReadYourWrite(b *testing.B) {
	t := undelayed.start(b.Skip, b.Fatal)
	ctx := context.Background()
	_ = createDatabase(ctx, t, "ryw") // made by an earlier run of the same topology, or now
	primary, err := pgx.Connect(ctx, withMode(t.PrimaryURL("ryw"), "exec"))
	if err != nil {
		b.Fatal(err)
	}
	defer primary.Close(ctx)
	if _, err := primary.Exec(ctx, "CREATE TABLE IF NOT EXISTS counters (id int PRIMARY KEY, n bigint NOT NULL); "+
		"INSERT INTO counters VALUES (1, 0) ON CONFLICT DO NOTHING"); err != nil {
		b.Fatal(err)
	}
	if err := t.CaughtUp(ctx); err != nil {
		b.Fatal(err)
	}
	standby, err := pgx.Connect(ctx, withMode(t.StandbyURL("ryw"), "exec"))
	if err != nil {
		b.Fatal(err)
	}
	defer standby.Close(ctx)
	write := func() (int64, string) {
		var n int64
		var lsn string
		if err := primary.QueryRow(ctx, "UPDATE counters SET n = n + 1 WHERE id = 1 RETURNING n").Scan(&n); err != nil {
			b.Fatal(err)
		}
		if err := primary.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
			b.Fatal(err)
		}
		return n, lsn
	}
	b.Run("write_then_read_on_primary", func(b *testing.B) {
		for range b.N {
			wrote, _ := write()
			var n int64
			if err := primary.QueryRow(ctx, "SELECT n FROM counters WHERE id = 1").Scan(&n); err != nil || n != wrote {
				b.Fatalf("read %d after writing %d: %v", n, wrote, err)
			}
		}
	})
	b.Run("write_then_read_on_standby_once_replayed", func(b *testing.B) {
		polls, waited := 0, time.Duration(0)
		for range b.N {
			wrote, lsn := write()
			began := time.Now()
			// The replay position is asked before the read, in a statement of its own: a
			// statement takes its snapshot as it starts and calls the function later, so a
			// position read beside the row may already count a commit its snapshot misses.
			for {
				var replayed bool
				if err := standby.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", lsn).Scan(&replayed); err != nil {
					b.Fatal(err)
				}
				if replayed {
					break
				}
				polls++
				// A pause between asks, as a reader waiting for its turn would make: asking
				// without one takes the processor the standby needs to replay.
				time.Sleep(250 * time.Microsecond)
			}
			waited += time.Since(began)
			var n int64
			if err := standby.QueryRow(ctx, "SELECT n FROM counters WHERE id = 1").Scan(&n); err != nil || n != wrote {
				b.Fatalf("the standby had replayed %s yet read %d after writing %d: %v", lsn, n, wrote, err)
			}
		}
		b.ReportMetric(float64(polls)/float64(b.N), "polls/op")
		b.ReportMetric(float64(waited.Microseconds())/float64(b.N), "wait-µs/op")
	})
}
