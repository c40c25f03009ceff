// Command ridebench measures Ride API on PostgreSQL with a realistic data set: it loads the
// data (or reuses it), starts the real rideapi binary against it, drives each hot path over
// HTTP from this separate process at a fixed concurrency, runs the same SQL directly with pgx
// at the same concurrency for the same time (the database's own ceiling), and prints req/s,
// latency percentiles, errors and the ratio of the two, plus the cost of a list page by depth.
//
// Run it with `go tool task bench`, which builds the server binary first.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

func main() {
	log.SetFlags(log.Ltime)
	o := parseFlags()
	if o.handwritten != "" {
		log.Fatal(serveHandwritten(o.handwritten, o.handwrittenDB))
	}
	if err := benchmark(context.Background(), o); err != nil {
		log.Fatal(err)
	}
}

type options struct {
	adminURL, dbName, rideapi, addr string
	hwAddr                          string
	compare, compareAddr, compareDB string
	data                            dataset
	concurrency                     int
	warmup, duration, depthDuration time.Duration
	rounds                          int
	only                            string
	reporters, positions            int // the booking's fleet: drivers reporting, reports a second
	sqlite, sqliteAddr              string
	sqliteTrips                     int

	// The -handwritten mode: this binary serving as the hand-written server (handwritten.go).
	handwritten, handwrittenDB string
}

func parseFlags() options {
	var o options
	flag.StringVar(&o.adminURL, "pg", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "URL of a database on the PostgreSQL server to create the benchmark database on")
	flag.StringVar(&o.dbName, "db", "ride_bench", "name of the benchmark database (created when missing)")
	flag.StringVar(&o.rideapi, "rideapi", ".bench/rideapi", "the server binary (go build ./server/cmd/rideapi)")
	flag.StringVar(&o.addr, "addr", "127.0.0.1:18080", "address the server listens on")
	flag.StringVar(&o.compare, "compare", "", "a second server binary (say, a build of the previous commit) to run in the same rounds as -rideapi, so that a change is measured under the same load and the same drift of the machine")
	flag.StringVar(&o.compareAddr, "compare-addr", "127.0.0.1:18081", "address the -compare server listens on")
	flag.StringVar(&o.compareDB, "compare-db", "", "a database of its own for the -compare server, holding the same data with that build's schema and indexes (see README.md, Comparing a schema change); empty: the -db database")
	flag.StringVar(&o.hwAddr, "hw-addr", "127.0.0.1:18090", "address the hand-written comparison server listens on")
	flag.StringVar(&o.handwritten, "handwritten", "", "internal: serve as the hand-written comparison server on this address")
	flag.StringVar(&o.handwrittenDB, "handwritten-db", "", "internal: the database URL of -handwritten")
	flag.IntVar(&o.data.Trips, "trips", 1_000_000, "trips to load")
	flag.IntVar(&o.data.Drivers, "drivers", 20_000, "drivers to load")
	flag.IntVar(&o.data.Riders, "riders", 200_000, "riders to load")
	flag.IntVar(&o.data.Cities, "cities", 50, "cities to load")
	flag.IntVar(&o.data.ActiveTrips, "active", 2_000, "trips in an active status")
	flag.IntVar(&o.concurrency, "c", 8, "concurrent clients, for the server and for the reference")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "warm-up per scenario, not measured")
	flag.DurationVar(&o.duration, "d", 10*time.Second, "measured time per scenario")
	flag.DurationVar(&o.depthDuration, "depth-d", 4*time.Second, "measured time per page depth")
	flag.IntVar(&o.rounds, "rounds", 5, "rounds per scenario: the server and the reference (and the page depths) take turns, so background load hits them alike")
	flag.IntVar(&o.reporters, "reporters", 200, "drivers who report positions over HTTP, with driver keys of their own, while bookings are measured")
	flag.IntVar(&o.positions, "positions", 100, "position reports a second, in all, while bookings are measured (the same for the server and the reference)")
	flag.StringVar(&o.sqlite, "sqlite", ".bench/ride_bench.sqlite", "SQLite file the read scenarios also run on, with the server on it (loaded when it does not hold the -sqlite-trips data set); empty: no SQLite")
	flag.StringVar(&o.sqliteAddr, "sqlite-addr", "127.0.0.1:18082", "address the server on SQLite listens on")
	flag.IntVar(&o.sqliteTrips, "sqlite-trips", 100_000, "trips of the SQLite data set (drivers, riders and cities in the PostgreSQL one's proportions)")
	flag.StringVar(&o.only, "only", "", "run only the scenarios whose name contains this (\"depth\": only the page-depth table)")
	flag.Parse()
	return o
}

func benchmark(ctx context.Context, o options) error {
	if o.rounds < 5 {
		log.Printf("-rounds %d: the ratios of record are medians of at least 5 rounds", o.rounds)
	}
	dbURL, err := databaseURL(o.adminURL, o.dbName)
	if err != nil {
		return err
	}
	total := time.Now()
	if err := ensureDatabase(ctx, o.adminURL, o.dbName); err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	if err := loadDataset(ctx, dbURL, o.data); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	if err := checkConnections(ctx, dbURL, o); err != nil {
		return err
	}
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	b := &bench{o: o, base: "http://" + o.addr, bookingDBs: []*bookingDB{{url: dbURL, st: st}}}

	// Keys: an admin key, and a driver key for each driver who reports positions, made with the
	// product's own code in the platform account; those of earlier runs are revoked first.
	keys := keyring{st: st}
	if n, err := keys.revokeEarlier(ctx); err != nil {
		return err
	} else if n > 0 {
		log.Printf("keys: revoked the %d keys of earlier runs", n)
	}
	if b.key, err = keys.create(ctx, auth.RoleAdmin, ""); err != nil {
		return err
	}
	secrets := []string{b.key}
	var compareURL string
	if o.compareDB != "" {
		if compareURL, err = databaseURL(o.adminURL, o.compareDB); err != nil {
			return err
		}
	}
	if o.wants(bookingName) {
		if run := o.warmup + o.duration/time.Duration(o.rounds); run > ride.PositionFreshness-positionRefresh {
			log.Printf("booking: runs of %s outlast the fleet's fresh positions (refreshed between runs); shorten -warmup or -d, or add -rounds", run)
		}
		for _, u := range []string{dbURL, compareURL} {
			if u == "" {
				continue
			}
			n, err := fleetOnline(ctx, u)
			if err != nil {
				return err
			}
			if n > 0 {
				log.Printf("booking: %d free drivers went online in %s", n, u)
			}
		}
		if b.fleet, err = newFleet(ctx, dbURL, keys, o.reporters, o.positions); err != nil {
			return fmt.Errorf("booking: %w", err)
		}
		for _, r := range b.fleet.reporters {
			secrets = append(secrets, r.key)
		}
	}

	// The server: the real binary, rate limits and demo data off, a fixed cursor secret (the
	// page-depth runs build cursors with it, through the server's own code), and a pool of as
	// many connections for requests as the reference holds (one per client), its side
	// connections apart: the default pool is sized for eight replicas on one database, and
	// with fewer connections than clients a transaction waits for a turn the reference never
	// waits for.
	secret := "ridebench-cursor-secret-0123456789"
	env := append(os.Environ(), "DATABASE_URL="+dbURL, "RIDE_ADDR="+o.addr, "RIDE_RATE_LIMIT_READ=0",
		"RIDE_RATE_LIMIT_WRITE=0", "RIDE_DEMO_DATA=false", "RIDE_CURSOR_SECRET="+secret,
		"RIDE_DB_MAX_CONNS="+strconv.Itoa(sideConns+o.concurrency))
	stopServer, err := startServer(ctx, o.rideapi, env, o.addr, "ridebench-server.log", &servers.real)
	if err != nil {
		return err
	}
	defer stopServer()
	if o.compare != "" {
		compareEnv := append(slices.Clip(env), "RIDE_ADDR="+o.compareAddr) // the last one wins
		if compareURL != "" {
			if err := copyKeys(ctx, dbURL, compareURL, secrets); err != nil {
				return err
			}
			compareEnv = append(compareEnv, "DATABASE_URL="+compareURL)
			cst, err := store.Open(ctx, compareURL)
			if err != nil {
				return err
			}
			defer cst.Close()
			b.bookingDBs = append(b.bookingDBs, &bookingDB{url: compareURL, st: cst})
		}
		stopCompare, err := startServer(ctx, o.compare, compareEnv, o.compareAddr, "ridebench-compare.log", &servers.compare)
		if err != nil {
			return err
		}
		defer stopCompare()
	}
	stopHandwritten, err := startHandwritten(ctx, o.hwAddr, dbURL+"&pool_max_conns="+strconv.Itoa(o.concurrency))
	if err != nil {
		return err
	}
	defer stopHandwritten()
	var lite *target
	if o.sqlite != "" && o.wantsAnyRead() {
		var stopLite func()
		if lite, stopLite, err = startSQLite(ctx, o); err != nil {
			return err
		}
		defer stopLite()
	}

	// The rounds start from vacuumed tables: a reused data set holds the dead rows of earlier
	// runs' payments, bookings and position reports, and the set-up above has just rewritten
	// the free drivers and the keys, which autovacuum (off on some hosts) would otherwise clear
	// at an arbitrary moment of some round, or never.
	for _, u := range []string{dbURL, compareURL} {
		if u == "" {
			continue
		}
		if err := vacuum(ctx, u); err != nil {
			return fmt.Errorf("vacuum: %w", err)
		}
	}
	pool, err := pgxpool.New(ctx, dbURL+"&pool_max_conns="+fmt.Sprint(o.concurrency))
	if err != nil {
		return err
	}
	defer pool.Close()
	var backend int
	if err := pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		return err
	}
	scopePostgres(backend, o.dbName, o.compareDB)
	// Each payment consumes an unpaid completed trip, a share for each side (paySides): enough
	// for 2,000 payments a second on each side through warm-up and run, and up to twice that
	// when the data set has them.
	payments := max(40_000, o.paySides()*2_000*int((o.warmup+o.duration+time.Second).Seconds()+1))
	smp, err := loadSamples(ctx, pool, 2*payments)
	if err != nil {
		return fmt.Errorf("samples: %w", err)
	}
	if len(smp.payable) < payments {
		return fmt.Errorf("only %d unpaid completed trips left for the payment scenario: reload with another -trips or drop the database", len(smp.payable))
	}
	log.Printf("samples: %d trip ids, %d drivers, %d payable trips", len(smp.tripIDs), len(smp.driverIDs), len(smp.payable))
	if b.fleet != nil {
		addrs := []string{o.addr, o.compareAddr}
		for i, db := range b.bookingDBs {
			if err := completeLeftovers(ctx, db, addrs[i], b.key, o.concurrency); err != nil {
				return fmt.Errorf("booking: %w", err)
			}
		}
		if err := b.fleet.loadRiders(ctx, pool); err != nil {
			return fmt.Errorf("booking: %w", err)
		}
		var free int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM drivers WHERE online AND available`).Scan(&free); err != nil {
			return err
		}
		log.Printf("booking: %d free online drivers in %d cities, %d free riders, %d drivers reporting %d positions a second",
			free, len(b.fleet.cities), len(b.fleet.riders), len(b.fleet.reporters), o.positions)
	}

	sampler, err := newSampler(ctx, dbURL, []byte(secret))
	if err != nil {
		return err
	}
	defer sampler.close()

	b.secret, b.smp, b.pool, b.sampler = []byte(secret), smp, pool, sampler
	// The payable trips are split: the reference pays one share, the server, the hand-written
	// server and the -compare build, drawing from the same trips in turn, the others.
	ref := len(smp.payable) - len(smp.payable)/o.paySides()
	b.payServer, b.payRef = smp.payable[:ref], smp.payable[ref:]

	scenarios, err := b.scenarios(ctx)
	if err != nil {
		return err
	}
	ours := &target{addr: o.addr, key: b.key, smp: &b.smp}
	var rows []reportRow
	for _, sc := range scenarios {
		if !o.wants(sc.name) {
			continue
		}
		labels := []string{sc.name + " (server)", sc.name + " (reference)"}
		ops := []func(context.Context, *worker) error{on(ours, sc.http), sc.reference}
		sides := []side{sideServer, sideReference}
		add := func(label string, s side, t *target) {
			labels, ops, sides = append(labels, sc.name+" ("+label+")"), append(ops, on(t, sc.http)), append(sides, s)
		}
		if sc.handwritten {
			add("hand-written", sideHandwritten, &target{addr: o.hwAddr, key: b.key, smp: &b.smp})
		}
		if o.compare != "" {
			add("compare", sideCompare, &target{addr: o.compareAddr, key: b.key, smp: &b.smp})
		}
		if sc.sqlite && lite != nil {
			add("SQLite", sideSQLite, lite)
		}
		if sc.rest != nil {
			labels, ops, sides = append(labels, sc.name+" (REST)"), append(ops, on(ours, sc.rest)), append(sides, sideREST)
		}
		var around func(context.Context, int) (func(), error)
		if sc.around != nil {
			around = func(ctx context.Context, op int) (func(), error) { return sc.around(ctx, sides[op]) }
		}
		// Each run's statements are planned on the tables as they are: after the warm-up, the
		// tables autovacuum would analyze by now are analyzed, on hosts where it is off too.
		// Then every measured window starts at a checkpoint, so that each side writes the same
		// share of full-page images (see README.md, Checkpoints).
		settle := func() {
			for _, u := range []string{dbURL, compareURL} {
				if u == "" {
					continue
				}
				if err := analyzeChanged(ctx, u); err != nil {
					log.Printf("analyze: %v", err)
				}
			}
			if err := checkpoint(ctx, dbURL); err != nil {
				log.Printf("checkpoint: %v", err)
			}
		}
		res, err := interleaved(ctx, labels, o.concurrency, o.rounds, o.warmup, o.duration, ops, around, settle)
		if err != nil {
			return err
		}
		row := reportRow{sc: sc, srv: res[0], ref: res[1]}
		for i, s := range sides {
			switch s {
			case sideHandwritten:
				row.hw = &res[i]
			case sideCompare:
				row.cmp = &res[i]
			case sideSQLite:
				row.lite = &res[i]
			case sideREST:
				row.rest = &res[i]
			}
		}
		rows = append(rows, row)
	}
	var depths []depthRow
	if o.only == "" || strings.Contains("depth", o.only) {
		if depths, err = b.depthTable(ctx); err != nil {
			return err
		}
	}
	report(os.Stdout, o, rows, depths, time.Since(total))
	return nil
}

// paySides is how many sides pay trips: the server, the reference and the hand-written
// server, and the -compare build.
func (o options) paySides() int {
	if o.compare != "" {
		return 4
	}
	return 3
}

// wants tells whether -only selects the scenario.
func (o options) wants(name string) bool { return o.only == "" || strings.Contains(name, o.only) }

// wantsAnyRead tells whether -only selects a scenario that runs on SQLite too.
func (o options) wantsAnyRead() bool {
	for _, name := range []string{"GET /v1/trips/{id}", "GET /v1/trips first page", "GET /v1/drivers/{id}/trips", "POST /v1/graphql trip"} {
		if o.wants(name) {
			return true
		}
	}
	return false
}

func databaseURL(adminURL, name string) (string, error) {
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", errors.New("malformed -pg URL")
	}
	u.Path = "/" + name
	q := u.Query()
	if q.Get("sslmode") == "" {
		q.Set("sslmode", "disable")
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// startServer starts the binary and waits until /readyz answers 200; then it sets *pid.
func startServer(ctx context.Context, bin string, env []string, addr, logName string, pid *int) (stop func(), err error) {
	if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
		c.Close()
		return nil, fmt.Errorf("%s is already taken: stop whatever listens there or pass -addr", addr)
	}
	cmd := exec.Command(bin)
	cmd.Env = env
	logs, _ := os.Create(filepath.Join(os.TempDir(), logName))
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop = func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		logs.Close()
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		res, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				*pid = cmd.Process.Pid
				log.Printf("server: %s ready on %s (pid %d, log %s)", bin, addr, cmd.Process.Pid, logs.Name())
				return stop, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	return nil, fmt.Errorf("server not ready within 60s; see %s", logs.Name())
}

type depthRow struct {
	depth int
	res   result
}

// depthTable measures a list page at several depths, all in the same windows (inTurns), so
// that their ratios compare the pages and not the moments they ran at. Depth 0 is the first
// page; deeper pages start from a cursor after the row at that position, made with the
// server's own code and secret (server.TripListCursor), exactly what a walk would have been
// handed there. A
// depth beyond the completed trips of a smaller data set is left out, and the log says so.
func (b *bench) depthTable(ctx context.Context) ([]depthRow, error) {
	admin := auth.Principal{Role: auth.RoleAdmin, Account: auth.DefaultAccount}
	depths := []int{0, 10_000, 100_000, 500_000}
	var labels []string
	var ops []func(context.Context, *worker) error
	for _, depth := range depths {
		path := "/v1/trips?status=completed&limit=20"
		if depth > 0 {
			var t time.Time
			var id string
			err := b.pool.QueryRow(ctx, `SELECT created_at, id FROM trips WHERE status = 'completed'
				ORDER BY created_at DESC, id DESC OFFSET $1 LIMIT 1`, depth-1).Scan(&t, &id)
			if errors.Is(err, pgx.ErrNoRows) {
				log.Printf("page depths: %d and deeper left out, the data set has fewer completed trips", depth)
				break
			} else if err != nil {
				return nil, fmt.Errorf("row at depth %d: %w", depth, err)
			}
			path += "&cursor=" + server.TripListCursor(b.secret, admin, gen.Completed, store.Keyset{Values: []int64{t.UnixMicro()}, ID: id})
		}
		labels = append(labels, fmt.Sprintf("page at depth %d", depth))
		ops = append(ops, func(ctx context.Context, w *worker) error {
			_, err := b.do(w, b.request(http.MethodGet, path, nil), http.StatusOK)
			return err
		})
	}
	res := inTurns(ctx, labels, b.o.concurrency, b.o.rounds, time.Second, b.o.depthDuration, ops)
	rows := make([]depthRow, len(labels))
	for i := range labels {
		rows[i] = depthRow{depth: depths[i], res: res[i]}
	}
	return rows, nil
}
