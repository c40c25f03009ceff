package main

import (
	"context"
	"fmt"
	"log"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// result is what one scenario measured: requests finished inside the measured window, their
// latencies (every sample, sorted, so percentiles are exact), and failures.
type result struct {
	n         int
	errors    int
	firstErr  error
	latencies []time.Duration
	elapsed   time.Duration
	cpu       cpuTimes // used during the measured window
	// rounds are the runs this result merges, one per round, in order (interleaved only).
	rounds []result
}

func (r result) rate() float64 { return float64(r.n) / r.elapsed.Seconds() }

func (r result) percentile(p float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	return r.latencies[min(len(r.latencies)-1, int(p*float64(len(r.latencies))))]
}

// worker is one client loop's state: its random source and whatever a scenario keeps between
// requests (the walk's cursor).
type worker struct {
	id     int
	rng    *rand.Rand
	cursor string
	keyT   time.Time
	keyID  string
	http   keepAlive
	// t is the server the worker's HTTP requests go to (nil: the address and key of the
	// request as built).
	t *target
}

// run calls op from `concurrency` goroutines for warmup (not counted), then for duration,
// timing each call. settle, when not nil, runs between the two.
func run(ctx context.Context, label string, concurrency int, warmup, duration time.Duration, op func(ctx context.Context, w *worker) error, settle func()) result {
	return runInTurns(ctx, []string{label}, concurrency, warmup, duration,
		[]func(ctx context.Context, w *worker) error{op}, settle)[0]
}

// runInTurns is run for several ops at once: each goroutine calls them in turn, one call each,
// starting from a different one, so every op meets the same load at every moment of the
// window; each op's calls are timed apart. All share the window's elapsed time; its CPU time
// is given only to a single op, as no share of it is any one op's.
func runInTurns(ctx context.Context, labels []string, concurrency int, warmup, duration time.Duration, ops []func(ctx context.Context, w *worker) error, settle func()) []result {
	var measuring atomic.Bool
	stop := make(chan struct{})
	type partial struct {
		lat      []time.Duration
		errors   int
		firstErr error
	}
	parts := make([][]partial, concurrency) // by goroutine, then by op
	var wg sync.WaitGroup
	for i := range concurrency {
		parts[i] = make([]partial, len(ops))
		wg.Go(func() {
			w := &worker{id: i, rng: rand.New(rand.NewPCG(uint64(i), 42))}
			defer w.http.close()
			for turn := i; ; turn++ {
				select {
				case <-stop:
					return
				default:
				}
				k := turn % len(ops)
				start := time.Now()
				err := ops[k](ctx, w)
				d := time.Since(start)
				if !measuring.Load() {
					continue
				}
				p := &parts[i][k]
				if err != nil {
					p.errors++
					if p.firstErr == nil {
						p.firstErr = err
					}
					continue
				}
				p.lat = append(p.lat, d)
			}
		})
	}
	label := strings.Join(labels, " + ")
	log.Printf("run: %-28s warming up %s", label, warmup)
	time.Sleep(warmup)
	if settle != nil {
		settle()
	}
	measuring.Store(true)
	begin, cpuBefore := time.Now(), readCPU()
	time.Sleep(duration)
	measuring.Store(false)
	elapsed, cpu := time.Since(begin), readCPU().sub(cpuBefore)
	close(stop)
	wg.Wait()
	out := make([]result, len(ops))
	for k := range ops {
		r := &out[k]
		r.elapsed = elapsed
		if len(ops) == 1 {
			r.cpu = cpu
		}
		for i := range parts {
			p := parts[i][k]
			r.latencies = append(r.latencies, p.lat...)
			r.errors += p.errors
			if r.firstErr == nil {
				r.firstErr = p.firstErr
			}
		}
		r.n = len(r.latencies)
		slices.Sort(r.latencies)
		log.Printf("run: %-28s %8.0f req/s  p50 %s  p99 %s  errors %d", labels[k], r.rate(),
			ms(r.percentile(0.5)), ms(r.percentile(0.99)), r.errors)
		if r.firstErr != nil {
			log.Printf("run: %-28s first error: %v", labels[k], r.firstErr)
		}
	}
	return out
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

// interleaved measures several ops in rounds, each op for duration/rounds per round (after
// one warm-up per op in the first round), and merges each op's rounds, keeping each round's
// result too. On a machine shared with other work, every op then sees the same background
// load, so their ratios hold even when the absolute rates drift; the rounds' ratios say how
// far they still move.
//
// around, when not nil, is called before each op's run (not measured) and the function it
// returns after it: whatever the scenario needs set up around a run, such as a fleet that
// reports positions while bookings are measured, and its clean-up. settle, when not nil, runs
// after each run's warm-up, before its measured window.
func interleaved(ctx context.Context, labels []string, concurrency, rounds int, warmup, duration time.Duration,
	ops []func(ctx context.Context, w *worker) error, around func(ctx context.Context, op int) (func(), error), settle func()) ([]result, error) {
	out := make([]result, len(ops))
	for round := range rounds {
		for i, op := range ops {
			wu := 100 * time.Millisecond
			if round == 0 {
				wu = warmup
			}
			done := func() {}
			if around != nil {
				var err error
				if done, err = around(ctx, i); err != nil {
					return nil, fmt.Errorf("%s: %w", labels[i], err)
				}
			}
			r := run(ctx, fmt.Sprintf("%s [%d/%d]", labels[i], round+1, rounds), concurrency, wu, duration/time.Duration(rounds), op, settle)
			done()
			out[i].addRound(r)
		}
	}
	for i := range out {
		slices.Sort(out[i].latencies)
	}
	return out, nil
}

// addRound merges one round's result into r, keeping the round too.
func (r *result) addRound(round result) {
	r.rounds = append(r.rounds, round)
	r.n += round.n
	r.errors += round.errors
	if r.firstErr == nil {
		r.firstErr = round.firstErr
	}
	r.latencies = append(r.latencies, round.latencies...)
	r.elapsed += round.elapsed
	r.cpu = r.cpu.add(round.cpu)
}

// inTurns measures several ops in rounds like interleaved, but all of them in one window per
// round (runInTurns): for ratios of latencies, which the load of the moment moves as much as
// the ops themselves, each op then meets exactly the load the others meet. Each round's window
// lasts duration/rounds for every op.
func inTurns(ctx context.Context, labels []string, concurrency, rounds int, warmup, duration time.Duration,
	ops []func(ctx context.Context, w *worker) error) []result {
	out := make([]result, len(ops))
	for round := range rounds {
		wu := 100 * time.Millisecond
		if round == 0 {
			wu = warmup
		}
		named := make([]string, len(labels))
		for i, l := range labels {
			named[i] = fmt.Sprintf("%s [%d/%d]", l, round+1, rounds)
		}
		window := duration * time.Duration(len(ops)) / time.Duration(rounds)
		for i, r := range runInTurns(ctx, named, concurrency, wu, window, ops, nil) {
			out[i].addRound(r)
		}
	}
	for i := range out {
		slices.Sort(out[i].latencies)
	}
	return out
}
