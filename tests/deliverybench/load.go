package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/time/rate"

	"github.com/rideapi/ride/store/storetest"
	"github.com/rideapi/ride/tests/internal/benchkit"
)

// phase is one measured stretch of load.
type phase struct {
	name      string
	duration  time.Duration
	failEvery int
	// strayElsewhere and strayHere hold an unrelated transaction that has written open for
	// the whole phase: in a scratch database of the same server, or idle in the service's own
	// database.
	strayElsewhere, strayHere bool
}

type phaseResult struct {
	phase
	events, failedMoves int64
	window              time.Duration
	acked               int             // acknowledged deliveries received during the load
	firsts              []time.Duration // first-attempt latency, event to receiver
	expected, delivered int             // (event, endpoint) pairs owed and acknowledged by the end
	refused, retried    int             // refused first attempts, and those acknowledged later
	drained             time.Duration   // from the end of the load to the last owed delivery
	invalid             int
	bookings, moves     []time.Duration // latency of POST /v1/rides and of PUT /v1/trips/{id}
}

// latencies collects the movers' request latencies.
type latencies struct {
	mu              sync.Mutex
	bookings, moves []time.Duration
}

func (l *latencies) add(booking bool, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if booking {
		l.bookings = append(l.bookings, d)
	} else {
		l.moves = append(l.moves, d)
	}
}

// measure runs the load of p and waits until every delivery it owes has been acknowledged.
func (b *bench) measure(ctx context.Context, p phase) (phaseResult, error) {
	res := phaseResult{phase: p}
	b.receiver.failEvery.Store(int64(p.failEvery))
	defer b.receiver.failEvery.Store(0)
	if p.strayElsewhere || p.strayHere {
		release, err := b.holdStrayTransaction(ctx, p.strayHere)
		if err != nil {
			return res, err
		}
		defer release()
	}

	var events, failed atomic.Int64
	pace := rate.NewLimiter(rate.Inf, 1)
	if b.o.rate > 0 {
		pace = rate.NewLimiter(rate.Limit(b.o.rate), max(1, b.o.rate/100))
	}
	mark := b.receiver.count()
	invalid := b.receiver.invalidCount()
	start := time.Now()
	load, stop := context.WithTimeout(ctx, p.duration)
	defer stop()
	var wg sync.WaitGroup
	var took latencies
	for m := range b.o.movers {
		wg.Go(func() { b.moveTrips(ctx, load, m, pace, &events, &failed, &took) })
	}
	<-load.Done()
	res.window = time.Since(start)
	wg.Wait() // the trips under way end, unpaced
	res.events, res.failedMoves = events.Load(), failed.Load()
	res.bookings, res.moves = benchkit.Sorted(took.bookings), benchkit.Sorted(took.moves)
	res.expected = int(res.events) * b.o.endpoints

	// Wait for every owed delivery, then read the phase's receipts.
	loadEnd := start.Add(res.window)
	deadline := time.Now().Add(60 * time.Second)
	var receipts []receipt
	for {
		receipts, _ = b.receiver.since(mark)
		acked := map[string]time.Time{}
		for _, r := range receipts {
			if r.acked && !r.created.Before(start) {
				acked[r.eventID+r.path] = r.at
			}
		}
		res.delivered = len(acked)
		if res.delivered >= res.expected || time.Now().After(deadline) {
			for _, at := range acked {
				res.drained = max(res.drained, at.Sub(loadEnd))
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	refusedPairs := map[string]bool{}
	for _, r := range receipts {
		if r.acked && r.at.Before(loadEnd) {
			res.acked++
		}
		if r.created.Before(start) {
			continue
		}
		if r.attempt == 1 {
			res.firsts = append(res.firsts, r.at.Sub(r.created))
			if !r.acked {
				res.refused++
				refusedPairs[r.eventID+r.path] = true
			}
		} else if r.acked && refusedPairs[r.eventID+r.path] {
			res.retried++
		}
	}
	res.firsts = benchkit.Sorted(res.firsts)
	res.invalid = b.receiver.invalidCount() - invalid
	return res, nil
}

// moveTrips books trips as one rider and moves each through arriving, in_progress and
// completed as its driver, on the replicas in turn: one event per move, each paced, until load
// ends; the trip under way is then finished unpaced, so that no driver stays busy.
func (b *bench) moveTrips(ctx, load context.Context, mover int, pace *rate.Limiter, events, failed *atomic.Int64, took *latencies) {
	rider := b.riders[mover]
	c := b.city
	estimate := map[string]any{
		"origin":      map[string]any{"lat": c.CenterLat + 0.005, "lng": c.CenterLng},
		"destination": map[string]any{"lat": c.CenterLat - 0.01, "lng": c.CenterLng - 0.005},
		"ride_type":   "economy",
	}
	for n := mover; load.Err() == nil; {
		if pace.Wait(load) != nil {
			return
		}
		var est struct {
			ID string `json:"estimate_id"`
		}
		var trip struct {
			ID     string `json:"id"`
			Driver struct {
				ID string `json:"id"`
			} `json:"driver_summary"`
		}
		err := b.call(ctx, n%3, http.MethodPost, "/v1/fare-estimates", rider, estimate, &est)
		if err == nil {
			start := time.Now()
			err = b.call(ctx, n%3, http.MethodPost, "/v1/rides", rider, map[string]any{"estimate_id": est.ID}, &trip)
			took.add(true, time.Since(start))
		}
		n++
		if err != nil {
			failed.Add(1)
			time.Sleep(50 * time.Millisecond) // no driver free just now
			continue
		}
		events.Add(1)
		driver := b.drivers[trip.Driver.ID].Key
		for _, status := range []string{"arriving", "in_progress", "completed"} {
			if load.Err() == nil {
				_ = pace.Wait(load)
			}
			start := time.Now()
			err := b.call(ctx, n%3, http.MethodPut, "/v1/trips/"+trip.ID, driver, map[string]any{"status": status}, nil)
			took.add(false, time.Since(start))
			n++
			if err != nil {
				failed.Add(1)
				break
			}
			events.Add(1)
		}
	}
}

// holdStrayTransaction opens a transaction that has written, so holds a transaction id, in the
// service's own database (here) or in a new scratch database of the same server, and leaves
// it idle until release.
func (b *bench) holdStrayTransaction(ctx context.Context, here bool) (release func(), err error) {
	url, drop := b.dbURL, func() {}
	if !here {
		if url, drop, err = storetest.NewPostgresDatabase(ctx, b.o.pg); err != nil {
			return nil, err
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		drop()
		return nil, err
	}
	release = func() {
		_ = conn.Close(context.Background())
		drop()
	}
	if _, err := conn.Exec(ctx, "BEGIN; CREATE TEMPORARY TABLE stray (n int); INSERT INTO stray VALUES (1)"); err != nil {
		release()
		return nil, err
	}
	return release, nil
}

func (r phaseResult) print(w io.Writer) {
	fmt.Fprintf(w, "%s, %s:\n", r.name, r.window.Round(100*time.Millisecond))
	fmt.Fprintf(w, "  events written by trip moves: %d (%.0f/s), %d moves failed\n",
		r.events, float64(r.events)/r.window.Seconds(), r.failedMoves)
	fmt.Fprintf(w, "  booking p50 %s, p99 %s; trip move p50 %s, p99 %s\n",
		benchkit.MS(benchkit.Percentile(r.bookings, 50)), benchkit.MS(benchkit.Percentile(r.bookings, 99)),
		benchkit.MS(benchkit.Percentile(r.moves, 50)), benchkit.MS(benchkit.Percentile(r.moves, 99)))
	fmt.Fprintf(w, "  deliveries acknowledged during the load: %d, %.0f/s\n", r.acked, float64(r.acked)/r.window.Seconds())
	fmt.Fprintf(w, "  first attempts: %d, event to receiver p50 %s, p99 %s, max %s\n", len(r.firsts),
		benchkit.MS(benchkit.Percentile(r.firsts, 50)), benchkit.MS(benchkit.Percentile(r.firsts, 99)), benchkit.MS(benchkit.Percentile(r.firsts, 100)))
	if r.failEvery > 0 {
		fmt.Fprintf(w, "  refused first attempts: %d, acknowledged on a retry: %d\n", r.refused, r.retried)
	}
	fmt.Fprintf(w, "  owed (event, endpoint) pairs: %d, acknowledged: %d, the last %s after the load stopped; bad signatures: %d\n\n",
		r.expected, r.delivered, r.drained.Round(time.Millisecond), r.invalid)
}
