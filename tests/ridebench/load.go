package main

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rideapi/ride/store"
)

// dataset says how much data the benchmark loads. Its String is stored in the database, so a
// later run reuses the data only when it was loaded with the same parameters.
type dataset struct {
	Trips, Drivers, Riders, Cities int
	// ActiveTrips are accepted, arriving or in progress, one per driver and per rider at most
	// (the partial unique indexes of migration 00003); of the rest one in ten is cancelled.
	ActiveTrips int
}

func (d dataset) String() string {
	return fmt.Sprintf("v3 trips=%d drivers=%d riders=%d cities=%d active=%d",
		d.Trips, d.Drivers, d.Riders, d.Cities, d.ActiveTrips)
}

// ensureDatabase creates the benchmark database on the server of adminURL when it is missing.
func ensureDatabase(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	}
	return err
}

// loadDataset migrates the database with the real migrations and fills it, unless it already
// holds this dataset.
func loadDataset(ctx context.Context, dbURL string, d dataset) error {
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		return err
	}
	err = st.Migrate(ctx)
	st.Close()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}

	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS ridebench_dataset (params text NOT NULL, loaded_at timestamptz NOT NULL)`); err != nil {
		return err
	}
	var have string
	_ = conn.QueryRow(ctx, `SELECT params FROM ridebench_dataset`).Scan(&have)
	if have == d.String() {
		log.Printf("load: database already holds %s; reusing it", d)
		return nil
	}

	start := time.Now()
	step := func(what string, sql string, args ...any) error {
		t := time.Now()
		tag, err := conn.Exec(ctx, sql, args...)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		rows := ""
		if tag.Insert() {
			rows = fmt.Sprintf("%d rows", tag.RowsAffected())
		}
		log.Printf("load: %-38s %12s %6.1fs  (total %5.1fs)", what, rows,
			time.Since(t).Seconds(), time.Since(start).Seconds())
		return nil
	}
	// Bulk-load settings for this connection only: no waiting for WAL flushes, and no per-row
	// foreign-key triggers (the generator keeps every reference valid by construction).
	for _, s := range []string{
		`SET synchronous_commit = off`,
		`SET session_replication_role = replica`,
		`SET maintenance_work_mem = '512MB'`,
	} {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	if err := step("empty the tables", `TRUNCATE ridebench_dataset, receipts, payments, idempotency_records,
		cancellations, fare_estimates, events, trips, riders, drivers, cities, api_keys CASCADE`); err != nil {
		return err
	}
	// The trips indexes of the migrations are dropped for the load and rebuilt from their own
	// definitions afterwards: one sort per index instead of a million insertions into each.
	rows, err := conn.Query(ctx, `SELECT indexname, indexdef FROM pg_indexes
		WHERE schemaname = current_schema() AND tablename = 'trips' AND indexname <> 'trips_pkey'`)
	if err != nil {
		return err
	}
	type index struct{ name, def string }
	indexes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (index, error) {
		var i index
		return i, r.Scan(&i.name, &i.def)
	})
	if err != nil {
		return err
	}
	for _, i := range indexes {
		if _, err := conn.Exec(ctx, "DROP INDEX "+pgx.Identifier{i.name}.Sanitize()); err != nil {
			return err
		}
	}

	if err := step("cities", `INSERT INTO cities
		SELECT 'bench-' || lpad(c::text, 2, '0'), 'Bench City ' || c,
		       -40 + c, -120 + c * 2, 25000, 'usd', 250, 120, 30, 700, $1
		FROM generate_series(0, $2 - 1) AS c`, benchEpoch, d.Cities); err != nil {
		return err
	}
	if err := step("drivers", `INSERT INTO drivers
		SELECT `+sqlID("drv", "i")+`, 'Driver ' || i, 3.5 + (i % 16) / 10.0,
		       'https://img.example.com/drivers/' || i || '.jpg',
		       (ARRAY['Toyota','Honda','Tesla','Ford'])[1 + i % 4], 'Model ' || (i % 7),
		       (ARRAY['black','white','grey','blue'])[1 + i % 4], 'B' || lpad(i::text, 6, '0'),
		       'bench-' || lpad((i % $2)::text, 2, '0'),
		       -40 + i % $2 + 0.01, -120 + (i % $2) * 2 + 0.01, i >= $3, $1, $1
		FROM generate_series(0, $4 - 1) AS i`, benchEpoch, d.Cities, d.ActiveTrips, d.Drivers); err != nil {
		return err
	}
	if err := step("riders", `INSERT INTO riders
		SELECT `+sqlID("rdr", "i")+`, 'Rider ' || i, 4.0 + (i % 11) / 10.0, $1, 'tok_bench_' || i
		FROM generate_series(0, $2 - 1) AS i`, benchEpoch, d.Riders); err != nil {
		return err
	}
	// Trip i has driver i mod Drivers (whose city it takes) and rider i·7919 mod Riders (7919
	// is prime to Riders, so the first ActiveTrips trips have distinct drivers and riders).
	// created_at spreads over 180 days before benchEpoch by a hash of i; active trips are
	// the newest. Rows are written oldest first, as a live service writes them, so created_at
	// follows their order on disk (PostgreSQL's correlation about 1), which is what query
	// plans meet in production.
	if d.Riders%7919 == 0 || d.Drivers%d.Cities != 0 || d.ActiveTrips > d.Drivers || d.ActiveTrips > d.Riders {
		return fmt.Errorf("dataset %s breaks the generator's assumptions", d)
	}
	if err := step("trips", `INSERT INTO trips (id, status, ride_type, city, rider_id, driver_id,
		    pickup_lat, pickup_lng, pickup_address, dropoff_lat, dropoff_lng, dropoff_address,
		    pickup_time, fare_total, fare_currency, eta_minutes, created_at, updated_at,
		    completed_at, cancelled_at, route_polyline, matching_score, driver_payout, platform_cost)
		SELECT id, status, (ARRAY['economy','comfort','xl'])[1 + i % 3], city, rider, driver,
		       lat, lng, i || ' Pickup Street', lat + 0.02, lng + 0.03, i || ' Dropoff Avenue',
		       created + make_interval(mins => eta), fare, 'usd', eta, created,
		       created + interval '30 minutes',
		       CASE WHEN status = 'completed' THEN created + interval '30 minutes' END,
		       CASE WHEN status = 'cancelled' THEN created + interval '3 minutes' END,
		       'bench_polyline', 0.5, fare * 3 / 4, fare / 10
		FROM (
		  SELECT i, `+sqlID("trp", "i")+` AS id,
		         CASE WHEN i < $2 THEN (ARRAY['accepted','arriving','in_progress'])[1 + i % 3]
		              WHEN h % 10 = 0 THEN 'cancelled' ELSE 'completed' END AS status,
		         'bench-' || lpad((i % $4)::text, 2, '0') AS city,
		         `+sqlID("rdr", "(i::bigint * 7919) % $5")+` AS rider,
		         `+sqlID("drv", "i % $3")+` AS driver,
		         -40 + i % $4 + (h % 1000) / 50000.0 AS lat, -120 + (i % $4) * 2 + (h % 997) / 50000.0 AS lng,
		         700 + h % 4000 AS fare, 2 + i % 12 AS eta,
		         CASE WHEN i < $2 THEN $1::timestamptz - make_interval(secs => i)
		              ELSE $1::timestamptz - interval '1 day' - (h % 15552000000000) * interval '1 microsecond' END AS created
		  FROM generate_series(0, $6 - 1) AS i,
		       LATERAL (SELECT ('x' || substr(md5('h' || i), 1, 12))::bit(48)::bigint AS h) AS hash
		) AS t
		ORDER BY created`, benchEpoch, d.ActiveTrips, d.Drivers, d.Cities, d.Riders, d.Trips); err != nil {
		return err
	}
	for n, i := range indexes {
		if err := step(fmt.Sprintf("index %d/%d %s", n+1, len(indexes), i.name), i.def); err != nil {
			return err
		}
	}
	// One in three completed trips is paid, with its receipt, as in a service that has been
	// taking payments; the rest are the payment scenario's. A payment's statements (the
	// paid check, the receipt's foreign-key check) then meet tables of production's size, not
	// empty ones (see analyzeChanged).
	paid := `FROM trips WHERE status = 'completed' AND get_byte(decode(md5(id), 'hex'), 0) % 3 = 0`
	if err := step("payments", `INSERT INTO payments (id, trip_id, amount, currency, status, payment_method, provider_ref, created_at)
		SELECT `+derivedID("pay")+`, id, fare_total, fare_currency, 'succeeded', 'pm_card_visa',
		       'ch_' || substr(md5('ch' || id), 1, 24), completed_at
		`+paid); err != nil {
		return err
	}
	if err := step("receipts", `INSERT INTO receipts (id, trip_id, payment_id, amount, currency, line_items, issued_at)
		SELECT `+derivedID("rcp")+`, id, `+derivedID("pay")+`, fare_total, fare_currency,
		       '[{"kind":"base_fare","amount":' || fare_total || '}]', completed_at
		`+paid); err != nil {
		return err
	}
	if err := step("analyze", `ANALYZE`); err != nil {
		return err
	}
	return step("record the dataset", `INSERT INTO ridebench_dataset VALUES ($1, now())`, d.String())
}

// vacuum runs VACUUM (ANALYZE) on the database at dbURL.
func vacuum(ctx context.Context, dbURL string) error {
	start := time.Now()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `VACUUM (ANALYZE)`); err != nil {
		return err
	}
	log.Printf("vacuum: %s in %.1fs", conn.Config().Database, time.Since(start).Seconds())
	return nil
}

// analyzeChanged analyzes the tables of the database at dbURL that autovacuum would analyze
// now: those changed by more than 50 rows and a tenth of their size since their last
// analysis (its default thresholds). Writes soon outgrow the tables a run began with, the
// idempotency records' say, and a statement a connection planned on a table of a few rows
// (a sequential scan) stays planned so until the table is analyzed: with autovacuum off, as
// on some hosts, until the connection ends.
func analyzeChanged(ctx context.Context, dbURL string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT format('%I.%I', schemaname, relname) FROM pg_stat_user_tables
		WHERE n_mod_since_analyze > 50 + 0.1 * n_live_tup`)
	if err != nil {
		return err
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, t := range tables {
		if _, err := conn.Exec(ctx, "ANALYZE "+t); err != nil {
			return err
		}
	}
	return nil
}

// checkpoint has the database server write a checkpoint now. After one, the first change
// of each page writes the whole page to the WAL, which costs a payment twice as much WAL
// as it does minutes later; starting every measured window at one puts each side at the
// same point of that curve, where the server's timed checkpoints (every five minutes) would
// fall into one side's window and not the others'.
func checkpoint(ctx context.Context, dbURL string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CHECKPOINT")
	return err
}

// benchEpoch is the dataset's "now": every trip was created before it.
var benchEpoch = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// sqlID is an SQL expression for a deterministic id of the server's form: prefix, underscore,
// 26 characters of its lowercase base32 alphabet. The first 25 come from the md5 of prefix and
// n (hex digits 0, 1, 8 and 9, which the alphabet lacks, mapped to w, x, y and z), and the last
// is one of the eight characters whose two padding bits are zero, as ride.ValidID requires.
func sqlID(prefix, n string) string {
	return strings.NewReplacer("PREFIX", prefix, "N", n).Replace(
		`('PREFIX_' || translate(substr(md5('PREFIX' || (N)), 1, 25), '0189', 'wxyz') || substr('aeimquy4', 1 + ((N) % 8)::int, 1))`)
}

// derivedID is SQL for the id with prefix of the row derived from the trip in column id (its
// payment, its receipt): well-formed and the same on every load.
func derivedID(prefix string) string {
	return strings.NewReplacer("PREFIX", prefix).Replace(
		`('PREFIX_' || translate(substr(md5('PREFIX' || id), 1, 25), '0189', 'wxyz') || 'a')`)
}

// samples are the rows the scenarios draw their requests from.
type samples struct {
	tripIDs   []string
	driverIDs []string
	// payable are completed, unpaid trips with their fares; each payment consumes one.
	payable []payableTrip
}

type payableTrip struct {
	id   string
	fare int64
}

func loadSamples(ctx context.Context, pool *pgxpool.Pool, payments int) (samples, error) {
	var s samples
	var err error
	collect := func(sql string, args ...any) ([]string, error) {
		rows, err := pool.Query(ctx, sql, args...)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowTo[string])
	}
	// The loaded trips only, here and for payments: a reused data set also holds the trips
	// earlier runs booked, which a -compare-db copy made before them lacks (its build would
	// answer 404 for them).
	if s.tripIDs, err = collect(`SELECT id FROM trips TABLESAMPLE SYSTEM (5) REPEATABLE (7) WHERE created_at < $1`, benchEpoch); err != nil {
		return s, err
	}
	if s.driverIDs, err = collect(`SELECT id FROM drivers`); err != nil {
		return s, err
	}
	rows, err := pool.Query(ctx, `SELECT t.id, t.fare_total FROM trips t
		WHERE t.status = 'completed' AND t.created_at < $2 AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.trip_id = t.id)
		LIMIT $1`, payments, benchEpoch)
	if err != nil {
		return s, err
	}
	s.payable, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (payableTrip, error) {
		var p payableTrip
		return p, r.Scan(&p.id, &p.fare)
	})
	return s, err
}
