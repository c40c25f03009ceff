package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// The booking scenario: a fresh fare estimate, then POST /v1/rides with an Idempotency-Key, by
// the platform's admin for a rider of the data set (the dispatch desk's booking; a rider's own
// app makes the same two calls), in a city whose free drivers are online with fresh positions.
//
// The fleet. At start every free driver goes online at a spot of their own within
// fleetSpread of their city's centre (a set-up step in SQL, like the loader). Before each run
// the positions are made fresh again with the store's own ReportPositionsInPlace when they
// are older than positionRefresh (what parked apps that keep running report), and during the
// run -reporters drivers, with driver keys of the platform account, report positions over
// HTTP at -positions reports a second in all: a constant background that the server's and the
// reference's runs share alike.
//
// Releasing drivers. After each run every trip it booked goes in_progress, then completed, by
// the admin (PUT /v1/trips/{id}), which frees its driver and its rider for the next run. The
// completions run between runs, not during them: their cost grows with the rate of bookings, so
// inside a run they would take more from the faster side and squeeze the ratio towards 1. A run
// therefore needs as many free drivers and riders as it books, which the log states at start.

// fleetSpread is how far from their city's centre the drivers stand; pickups lie within
// pickupSpread of it and drop-offs within dropoffSpread, all inside the city's area (25 km).
// The matching looks for the nearest driver within 3 km of the pickup first, then in the whole
// city: with these spreads the first look finds about one in ten of the city's drivers.
const (
	fleetSpread    = 10_000.0
	pickupSpread   = 8_000.0
	dropoffSpread  = 8_000.0
	positionSpread = 30.0 // how far a reporting driver's reports wander from their spot
	// farPickup is a pickup farther from every driver than the first look reaches, and
	// farDropoff its drop-off: the sample booking that captures the look at the whole city.
	farPickup, farDropoff = 20_000.0, 18_000.0
)

// positionRefresh is how old the fleet's positions may grow before a run makes them fresh
// again: well within ride.PositionFreshness, past which matching ignores a driver.
const positionRefresh = ride.PositionFreshness / 4

// bookingDB is one database that bookings are made on: the -db one, and the -compare-db one
// when the -compare build has its own.
type bookingDB struct {
	url       string
	st        *store.Store
	refreshed time.Time
}

// fleet is the booking scenario's world.
type fleet struct {
	cities    []fleetCity
	riders    []string // riders of the platform account without an active trip
	nextRider atomic.Int64
	reporters []reporter
	rate      int // position reports a second, in all

	mu     sync.Mutex
	booked map[string][]string // the server that moves them (its address) → trips of this run
}

type fleetCity struct {
	id       string
	lat, lng float64
}

type reporter struct {
	id, key  string
	lat, lng float64
}

// fleetOnline makes every free driver of db online at a spot of their own near their city's
// centre, with a fresh position, every run the same. The spot comes from the driver's id, so a
// copy of the data (-compare-db) puts each driver where -db does.
func fleetOnline(ctx context.Context, dbURL string) (int64, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	// Two uniform numbers in [0, 1) from the id's md5: distance (its square root, so that the
	// spots fill the disc evenly) and bearing.
	const a = `(('x' || substr(md5(d.id), 1, 8))::bit(32)::bigint / 4294967296.0)`
	const b = `(('x' || substr(md5(d.id), 9, 8))::bit(32)::bigint / 4294967296.0)`
	tag, err := conn.Exec(ctx, `UPDATE drivers d SET online = true, position_at = now(), heading = NULL, speed = NULL,
		    lat = c.center_lat + $1 * sqrt(`+a+`) * cos(2 * pi() * `+b+`) / 111195.0,
		    lng = c.center_lng + $1 * sqrt(`+a+`) * sin(2 * pi() * `+b+`) / (111195.0 * cos(radians(c.center_lat)))
		FROM cities c
		WHERE c.id = d.city AND d.available`, fleetSpread)
	if err != nil {
		return 0, fmt.Errorf("take the fleet online: %w", err)
	}
	return tag.RowsAffected(), nil
}

// newFleet reads the cities, the free riders and the reporting drivers of the -db database
// (taken online by fleetOnline), and makes the reporters' keys.
func newFleet(ctx context.Context, dbURL string, keys keyring, reporters, rate int) (*fleet, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	f := &fleet{rate: rate, booked: map[string][]string{}}
	rows, err := conn.Query(ctx, `SELECT id, center_lat, center_lng FROM cities
		WHERE id IN (SELECT city FROM drivers WHERE online AND available) ORDER BY id`)
	if err != nil {
		return nil, err
	}
	f.cities, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (fleetCity, error) {
		var c fleetCity
		return c, r.Scan(&c.id, &c.lat, &c.lng)
	})
	if err != nil {
		return nil, err
	}
	if len(f.cities) == 0 {
		return nil, errors.New("no city has a free driver: load a data set with -active below -drivers")
	}
	// Reporters: as many drivers of each city, the first by id.
	rows, err = conn.Query(ctx, `SELECT id, lat, lng FROM (
		  SELECT id, lat, lng, row_number() OVER (PARTITION BY city ORDER BY id) AS n
		  FROM drivers WHERE online AND available) AS d
		WHERE n <= $1 ORDER BY n, id LIMIT $2`, (reporters+len(f.cities)-1)/len(f.cities), reporters)
	if err != nil {
		return nil, err
	}
	f.reporters, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (reporter, error) {
		var d reporter
		return d, r.Scan(&d.id, &d.lat, &d.lng)
	})
	if err != nil {
		return nil, err
	}
	for i := range f.reporters {
		if f.reporters[i].key, err = keys.create(ctx, auth.RoleDriver, f.reporters[i].id); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// loadRiders reads the riders of the platform account without an active trip, in an order of
// their own (fixed, so runs draw alike).
func (f *fleet) loadRiders(ctx context.Context, pool interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) error {
	rows, err := pool.Query(ctx, `SELECT id FROM riders r WHERE account = $1
		AND NOT EXISTS (SELECT 1 FROM trips t WHERE t.rider_id = r.id AND t.status IN ('accepted', 'arriving', 'in_progress'))`,
		auth.DefaultAccount)
	if err != nil {
		return err
	}
	if f.riders, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return err
	}
	rand.New(rand.NewPCG(28, 1)).Shuffle(len(f.riders), func(i, j int) { f.riders[i], f.riders[j] = f.riders[j], f.riders[i] })
	if len(f.riders) == 0 {
		return errors.New("no rider of the platform account is free to book")
	}
	return nil
}

// rider is the next rider to book for. Every trip of a run is completed after it, so a run
// books for distinct riders as long as it books fewer trips than there are riders.
func (f *fleet) rider() string {
	return f.riders[int(f.nextRider.Add(1)-1)%len(f.riders)]
}

// route is a pickup and a drop-off in a random city of the fleet.
func (f *fleet) route(r *rand.Rand) (fleetCity, ride.Point, ride.Point) {
	c := f.cities[r.IntN(len(f.cities))]
	return c, near(r, c.lat, c.lng, pickupSpread), near(r, c.lat, c.lng, dropoffSpread)
}

// near is a random point within meters of (lat, lng), evenly over the disc.
func near(r *rand.Rand, lat, lng, meters float64) ride.Point {
	d, a := meters*math.Sqrt(r.Float64()), 2*math.Pi*r.Float64()
	return ride.Point{
		Lat: lat + d*math.Cos(a)/111_195.0,
		Lng: lng + d*math.Sin(a)/(111_195.0*math.Cos(lat*math.Pi/180)),
	}
}

var rideTypes = []string{"economy", "comfort", "xl"}

// estimateBody asks for an estimate from one point to another, with addresses as a rider's
// app sends them (the data set's trips all have theirs).
func estimateBody(from, to ride.Point, rideType string) map[string]any {
	return map[string]any{
		"origin":      map[string]any{"lat": from.Lat, "lng": from.Lng, "address": "1 Pickup Street"},
		"destination": map[string]any{"lat": to.Lat, "lng": to.Lng, "address": "2 Dropoff Avenue"},
		"ride_type":   rideType,
	}
}

// report has the reporting drivers post their positions to addr, rate reports a second in all
// from two clients, until stop is closed. The function it returns waits for them to stop and
// says how many reports they sent, how many failed and the first failure.
func (f *fleet) report(addr string, stop <-chan struct{}) func() (int, int, error) {
	if f.rate <= 0 || len(f.reporters) == 0 {
		return func() (int, int, error) { return 0, 0, nil }
	}
	const clients = 2
	interval := time.Duration(float64(clients) * float64(time.Second) / float64(f.rate))
	var next, sent, failed atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			var conn keepAlive
			defer conn.close()
			r := rand.New(rand.NewPCG(uint64(c), 7))
			due := time.Now()
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Until(due)):
				}
				due = due.Add(interval)
				d := f.reporters[int(next.Add(1)-1)%len(f.reporters)]
				at := near(r, d.lat, d.lng, positionSpread)
				body, _ := json.Marshal(map[string]any{"positions": []map[string]any{{
					"lat": at.Lat, "lng": at.Lng, "heading": r.IntN(360), "speed": 8.5,
					"recorded_at": time.Now().UTC().Format(time.RFC3339Nano),
				}}})
				req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/drivers/"+d.id+"/positions", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+d.key)
				req.Header.Set("Content-Type", "application/json")
				code, answer, err := conn.roundTrip(req)
				if err == nil && code != http.StatusOK {
					err = fmt.Errorf("POST /v1/drivers/%s/positions: %d %s", d.id, code, bytes.TrimSpace(answer))
				}
				sent.Add(1)
				if err != nil {
					failed.Add(1)
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		})
	}
	return func() (int, int, error) {
		wg.Wait()
		return int(sent.Load()), int(failed.Load()), firstErr
	}
}

// refresh makes the fleet's positions in db fresh when they are older than positionRefresh.
func (db *bookingDB) refresh(ctx context.Context) error {
	if time.Since(db.refreshed) < positionRefresh {
		return nil
	}
	now := time.Now()
	if _, err := db.st.ReportPositionsInPlace(ctx, now); err != nil {
		return fmt.Errorf("refresh the fleet's positions: %w", err)
	}
	db.refreshed = now
	return nil
}
