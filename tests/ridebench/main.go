// Command ridebench measures Ride API on PostgreSQL with a realistic data set: it loads the
// data (or reuses it), starts the real rideapi binary against it, drives each hot path over
// HTTP from this separate process at a fixed concurrency, runs the same SQL directly with pgx
// at the same concurrency for the same time (the database's own ceiling), and prints req/s,
// latency percentiles, errors and the ratio of the two, plus the cost of a list page by depth.
//
// Run it with `go tool task bench`, which builds the server binary first.
package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server"
	"github.com/rideapi/ride/server/auth"
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
	flag.StringVar(&o.only, "only", "", "run only the scenarios whose name contains this (\"depth\": only the page-depth table)")
	flag.Parse()
	return o
}

func benchmark(ctx context.Context, o options) error {
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

	// The server: the real binary, rate limits and demo data off, a fixed cursor secret (the
	// page-depth runs build cursors with it, through the server's own code).
	secret := "ridebench-cursor-secret-0123456789"
	env := append(os.Environ(), "DATABASE_URL="+dbURL, "RIDE_ADDR="+o.addr, "RIDE_RATE_LIMIT_READ=0",
		"RIDE_RATE_LIMIT_WRITE=0", "RIDE_DEMO_DATA=false", "RIDE_CURSOR_SECRET="+secret)
	adminKey, err := createKey(ctx, o.rideapi, env, "admin")
	if err != nil {
		return err
	}
	stopServer, err := startServer(ctx, o.rideapi, env, o.addr, "ridebench-server.log", &servers.real)
	if err != nil {
		return err
	}
	defer stopServer()
	if o.compare != "" {
		compareEnv := append(slices.Clip(env), "RIDE_ADDR="+o.compareAddr) // the last one wins
		if o.compareDB != "" {
			compareURL, err := databaseURL(o.adminURL, o.compareDB)
			if err != nil {
				return err
			}
			if err := copyKey(ctx, dbURL, compareURL, adminKey); err != nil {
				return err
			}
			compareEnv = append(compareEnv, "DATABASE_URL="+compareURL)
		}
		stopCompare, err := startServer(ctx, o.compare, compareEnv, o.compareAddr, "ridebench-compare.log", &servers.compare)
		if err != nil {
			return err
		}
		defer stopCompare()
	}
	stopHandwritten, err := startHandwritten(ctx, o.hwAddr, dbURL)
	if err != nil {
		return err
	}
	defer stopHandwritten()

	pool, err := pgxpool.New(ctx, dbURL+"&pool_max_conns="+fmt.Sprint(o.concurrency))
	if err != nil {
		return err
	}
	defer pool.Close()
	// Each payment consumes an unpaid completed trip, half of them for the server and half for
	// the reference: enough for 2,000 payments a second on each side through warm-up and run.
	payments := max(40_000, 2*2_000*int((o.warmup+o.duration+time.Second).Seconds()+1))
	smp, err := loadSamples(ctx, pool, payments)
	if err != nil {
		return fmt.Errorf("samples: %w", err)
	}
	if len(smp.payable) < payments {
		return fmt.Errorf("only %d unpaid completed trips left for the payment scenario: reload with another -trips or drop the database", len(smp.payable))
	}
	log.Printf("samples: %d trip ids, %d drivers, %d payable trips", len(smp.tripIDs), len(smp.driverIDs), len(smp.payable))

	sampler, err := newSampler(ctx, dbURL, []byte(secret))
	if err != nil {
		return err
	}
	defer sampler.close()

	b := &bench{o: o, base: "http://" + o.addr, key: adminKey, secret: []byte(secret), smp: smp, pool: pool,
		sampler: sampler}
	// The payable trips are split: the server pays one half, the reference the other.
	half := len(smp.payable) / 2
	b.payServer, b.payRef = smp.payable[:half], smp.payable[half:]

	scenarios, err := b.scenarios(ctx)
	if err != nil {
		return err
	}
	var rows []reportRow
	for _, sc := range scenarios {
		if o.only != "" && !strings.Contains(sc.name, o.only) {
			continue
		}
		labels := []string{sc.name + " (server)", sc.name + " (reference)"}
		ops := []func(context.Context, *worker) error{sc.http, sc.reference}
		if sc.handwritten {
			labels, ops = append(labels, sc.name+" (hand-written)"), append(ops, redirected(sc.http, o.hwAddr))
		}
		if o.compare != "" {
			labels, ops = append(labels, sc.name+" (compare)"), append(ops, redirected(sc.http, o.compareAddr))
		}
		res := interleaved(ctx, labels, o.concurrency, o.rounds, o.warmup, o.duration, ops)
		row := reportRow{sc: sc, srv: res[0], ref: res[1]}
		if sc.handwritten {
			row.hw = &res[2]
		}
		if o.compare != "" {
			row.cmp = &res[len(res)-1]
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

// copyKey stores the key of the -db database in the -compare-db one too, so that one key
// authenticates on both servers.
func copyKey(ctx context.Context, fromURL, toURL, secret string) error {
	from, err := pgx.Connect(ctx, fromURL)
	if err != nil {
		return err
	}
	defer from.Close(ctx)
	to, err := pgx.Connect(ctx, toURL)
	if err != nil {
		return fmt.Errorf("-compare-db: %w", err)
	}
	defer to.Close(ctx)
	sum := sha256.Sum256([]byte(secret))
	var id, role, account string
	var created time.Time
	err = from.QueryRow(ctx, `SELECT id, role, account, created_at FROM api_keys WHERE hash = $1`,
		hex.EncodeToString(sum[:])).Scan(&id, &role, &account, &created)
	if err != nil {
		return fmt.Errorf("read the admin key: %w", err)
	}
	_, err = to.Exec(ctx, `INSERT INTO api_keys (id, hash, role, account, created_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT DO NOTHING`, id, hex.EncodeToString(sum[:]), role, account, created)
	if err != nil {
		return fmt.Errorf("copy the admin key to -compare-db: %w", err)
	}
	return nil
}

func createKey(ctx context.Context, bin string, env []string, role string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, "keys", "create", "--role", role)
	cmd.Env = env
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s keys create: %w", bin, err)
	}
	return strings.TrimSpace(string(out)), nil
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

// depthTable measures a list page at several depths. Depth 0 is the first page; deeper
// pages start from a cursor after the row at that position, made with the server's own code
// and secret (server.TripListCursor), exactly what a walk would have been handed there. A
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
	res := interleaved(ctx, labels, b.o.concurrency, b.o.rounds, time.Second, b.o.depthDuration, ops)
	rows := make([]depthRow, len(labels))
	for i := range labels {
		rows[i] = depthRow{depth: depths[i], res: res[i]}
	}
	return rows, nil
}

type reportRow struct {
	sc       *scenario
	srv, ref result
	hw       *result // the hand-written server, where the scenario has one
	cmp      *result // the -compare server
}

func report(out io.Writer, o options, rows []reportRow, depths []depthRow, took time.Duration) {
	w := bufio.NewWriter(out)
	defer w.Flush()
	fmt.Fprintf(w, "\nRide API benchmark — %s, concurrency %d, %s measured per scenario (server and reference taking turns in %d rounds) after %s warm-up (total %s)\n\n",
		o.data, o.concurrency, o.duration, o.rounds, o.warmup, took.Round(time.Second))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\treq/s\tp50\tp99\terrors\treference req/s\tratio\thand-written req/s\thand-written ratio\tours / hand-written\t")
	percent := func(a, b float64) string {
		if b <= 0 {
			return "–"
		}
		return fmt.Sprintf("%.0f %%", 100*a/b)
	}
	for _, r := range rows {
		hw, hwRatio, ours := "–", "–", "–"
		errors := r.srv.errors + r.ref.errors
		if r.hw != nil {
			hw, hwRatio, ours = fmt.Sprintf("%.0f", r.hw.rate()), percent(r.hw.rate(), r.ref.rate()), percent(r.srv.rate(), r.hw.rate())
			errors += r.hw.errors
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%d\t%.0f\t%s\t%s\t%s\t%s\t\n", r.sc.name, r.srv.rate(),
			ms(r.srv.percentile(0.5)), ms(r.srv.percentile(0.99)), errors, r.ref.rate(), percent(r.srv.rate(), r.ref.rate()),
			hw, hwRatio, ours)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nCPU time per request in µs, from /proc over the measured windows (the load generator and the reference's pgx client are this process)\n\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tserver\tPostgreSQL\tload generator\treference: PostgreSQL\tpgx client\thand-written: server\tPostgreSQL\t")
	for _, r := range rows {
		hwServer, hwPostgres := "–", "–"
		if r.hw != nil {
			hwServer, hwPostgres = perRequest(r.hw.cpu.handwritten, r.hw.n), perRequest(r.hw.cpu.postgres, r.hw.n)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.sc.name,
			perRequest(r.srv.cpu.server, r.srv.n), perRequest(r.srv.cpu.postgres, r.srv.n), perRequest(r.srv.cpu.self, r.srv.n),
			perRequest(r.ref.cpu.postgres, r.ref.n), perRequest(r.ref.cpu.self, r.ref.n), hwServer, hwPostgres)
	}
	tw.Flush()
	if len(rows) > 0 && rows[0].cmp != nil {
		fmt.Fprintf(w, "\n-compare %s against -rideapi %s, taking turns in the same rounds\n\n", o.compare, o.rideapi)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "scenario\treq/s\tp50\tp99\terrors\treq/s vs -rideapi\tCPU µs/req: server\tPostgreSQL\t-rideapi: server\tPostgreSQL\t")
		for _, r := range rows {
			c := r.cmp
			fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", r.sc.name, c.rate(), ms(c.percentile(0.5)),
				ms(c.percentile(0.99)), c.errors, percent(c.rate(), r.srv.rate()),
				perRequest(c.cpu.compare, c.n), perRequest(c.cpu.postgres, c.n),
				perRequest(r.srv.cpu.server, r.srv.n), perRequest(r.srv.cpu.postgres, r.srv.n))
		}
		tw.Flush()
	}
	if len(depths) > 0 {
		fmt.Fprintf(w, "\nList page (status=completed, limit=20) by depth, %s each in %d rounds; depth 0 is the first page, deeper pages start from a cursor\n\n", o.depthDuration, o.rounds)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "depth\treq/s\tp50\tp99\terrors\tp50 vs depth 0\t")
		for _, d := range depths {
			fmt.Fprintf(tw, "%d\t%.0f\t%s\t%s\t%d\t%.2f×\t\n", d.depth, d.res.rate(), ms(d.res.percentile(0.5)),
				ms(d.res.percentile(0.99)), d.res.errors,
				float64(d.res.percentile(0.5))/float64(max(depths[0].res.percentile(0.5), 1)))
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "\nWhat the reference executes (captured from the server's own code serving one sample request):\n")
	for _, r := range rows {
		fmt.Fprintf(w, "  %s — %s\n%s", r.sc.name, r.sc.refNote, describe(r.sc.sql))
	}
}
