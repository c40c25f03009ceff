package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rideapi/ride/tests/internal/benchkit"
	"golang.org/x/time/rate"
)

type ingestResult struct {
	target, batch                 int
	positions, requests, failures int64
	elapsed                       time.Duration
	idle, loaded                  []time.Duration // booking latencies
	// idleCPU and loadedCPU are the CPU seconds both replicas spent in each phase.
	idleCPU, loadedCPU float64
}

// measureIngest books trips alone, then while every worker reports batches of positions as
// fast as the replicas answer.
func (b *bench) measureIngest(ctx context.Context) (ingestResult, error) {
	res := ingestResult{target: b.o.rate, batch: b.o.batch}
	cpu0 := b.replicaCPU(ctx)
	idle, err := b.bookFor(ctx, 3*time.Second)
	if err != nil {
		return res, err
	}
	res.idle = idle
	cpu1 := b.replicaCPU(ctx)

	var positions, requests, failures atomic.Int64
	loadCtx, stop := context.WithCancel(ctx)
	// Reports are paced to the target rate (an open load, as a fleet's apps report on their
	// own clock); 0 reports as fast as the replicas answer.
	pace := rate.NewLimiter(rate.Inf, 1)
	if b.o.rate > 0 {
		perSecond := float64(b.o.rate) / float64(b.o.batch)
		pace = rate.NewLimiter(rate.Limit(perSecond), max(1, int(perSecond/100)))
	}
	var wg sync.WaitGroup
	start := time.Now()
	for w := range b.o.workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for loadCtx.Err() == nil {
				if pace.Wait(loadCtx) != nil {
					return
				}
				d := b.drivers[r.IntN(len(b.drivers))]
				if err := b.report(loadCtx, w%2, d, b.o.batch, time.Now()); err != nil {
					if loadCtx.Err() == nil {
						failures.Add(1)
					}
					continue
				}
				requests.Add(1)
				positions.Add(int64(b.o.batch))
			}
		})
	}
	loaded, err := b.bookFor(ctx, b.o.duration)
	stop()
	wg.Wait()
	res.elapsed = time.Since(start)
	res.positions, res.requests, res.failures = positions.Load(), requests.Load(), failures.Load()
	res.loaded = loaded
	res.idleCPU, res.loadedCPU = cpu1-cpu0, b.replicaCPU(ctx)-cpu1
	return res, err
}

// replicaCPU is the CPU time both replicas have spent so far, in seconds.
func (b *bench) replicaCPU(ctx context.Context) float64 {
	return b.scrape(ctx, 0).cpu + b.scrape(ctx, 1).cpu
}

// bookFor books and finishes trips one after another on alternating replicas for d, and
// returns the bookings' latencies.
func (b *bench) bookFor(ctx context.Context, d time.Duration) ([]time.Duration, error) {
	var latencies []time.Duration
	deadline := time.Now().Add(d)
	for i := 0; time.Now().Before(deadline); i++ {
		t, took, err := b.book(ctx, i%2, b.riders[len(b.riders)-1])
		if err != nil {
			return latencies, fmt.Errorf("booking: %w", err)
		}
		latencies = append(latencies, took)
		if err := b.finish(ctx, i%2, t); err != nil {
			return latencies, err
		}
	}
	return latencies, nil
}

func (r ingestResult) print(w io.Writer) {
	perSecond := float64(r.positions) / r.elapsed.Seconds()
	target := "as fast as the replicas answer"
	if r.target > 0 {
		target = fmt.Sprintf("target %d/s", r.target)
	}
	fmt.Fprintf(w, "Position ingest (%s, %d per report): %d positions in %d reports (%d failed) in %.1f s: %.0f positions/s, %.0f reports/s\n",
		target, r.batch, r.positions, r.requests, r.failures, r.elapsed.Seconds(), perSecond, float64(r.requests)/r.elapsed.Seconds())
	idle, loaded := benchkit.Sorted(r.idle), benchkit.Sorted(r.loaded)
	fmt.Fprintf(w, "Booking (POST /v1/rides), alone:            %4d bookings, p50 %s, p99 %s\n", len(idle), benchkit.MS(benchkit.Percentile(idle, 50)), benchkit.MS(benchkit.Percentile(idle, 99)))
	fmt.Fprintf(w, "Booking (POST /v1/rides), during ingest:    %4d bookings, p50 %s, p99 %s (p50 ratio %.2f)\n",
		len(loaded), benchkit.MS(benchkit.Percentile(loaded, 50)), benchkit.MS(benchkit.Percentile(loaded, 99)),
		float64(benchkit.Percentile(loaded, 50))/float64(max(benchkit.Percentile(idle, 50), 1)))
	// Per report with the bookings beside it included: subtracting them at their cost alone
	// would rest on a few seconds of a fresh replica, noisier than the bookings' share itself.
	fmt.Fprintf(w, "Replica CPU (A+B): %.1f ms per booking alone; %.2f s during ingest, %.0f µs per report (bookings included)\n\n",
		r.idleCPU*1000/float64(max(len(r.idle), 1)), r.loadedCPU, r.loadedCPU*1e6/float64(max(r.requests, 1)))
}
