package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rideapi/ride/tests/internal/benchkit"
)

type fanOutResult struct {
	streams, trips, reports int
	expected, received      int64
	delays                  []time.Duration
	// per replica: growth of heap in use, resident memory and goroutines with the streams open
	heap, rss, goroutines [2]float64
	perReplica            [2]int
}

// measureFanOut opens the streams, then has each followed trip's driver report positions on
// replica A, and measures when each stream receives each position.
func (b *bench) measureFanOut(ctx context.Context) (fanOutResult, error) {
	res := fanOutResult{streams: b.o.streams, trips: b.o.trips, reports: b.o.reports}
	// Fresh replicas that collect often: the heap in use then follows the live heap, and the
	// memory of a stream can be read from it.
	if err := b.startReplicas(ctx, "GOGC=10"); err != nil {
		return res, err
	}
	type followed struct {
		bookedTrip
		riderKey string
		driver   benchkit.Driver
	}
	var trips []followed
	for i := range b.o.trips {
		t, _, err := b.book(ctx, 0, b.riders[i])
		if err != nil {
			return res, err
		}
		trips = append(trips, followed{bookedTrip: t, riderKey: b.riders[i], driver: b.byID[t.Driver.ID]})
	}
	before := [2]metrics{}
	for i := range before {
		before[i] = b.scrape(ctx, i)
	}

	streamCtx, closeStreams := context.WithCancel(ctx)
	defer closeStreams()
	var sent sync.Map // recorded_at (as the API writes it) → when its report was sent
	var mu sync.Mutex
	var received atomic.Int64
	var ready sync.WaitGroup
	streamClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1}}
	for j := range b.o.streams {
		t, replica := trips[j%len(trips)], j%2
		res.perReplica[replica]++
		ready.Add(1)
		go func() {
			first := true
			defer func() {
				if first {
					ready.Done()
				}
			}()
			req, _ := http.NewRequestWithContext(streamCtx, http.MethodGet, b.replicas[replica]+"/v1/trips/"+t.ID+"/updates", nil)
			req.Header.Set("Authorization", "Bearer "+t.riderKey)
			req.Header.Set("Accept", "text/event-stream")
			resp, err := streamClient.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			lines := bufio.NewScanner(resp.Body)
			for lines.Scan() {
				data, ok := strings.CutPrefix(lines.Text(), "data: ")
				if !ok {
					continue
				}
				if first {
					first = false
					ready.Done()
				}
				var u struct {
					Location *struct {
						RecordedAt string `json:"recorded_at"`
					} `json:"driver_location"`
				}
				if json.Unmarshal([]byte(data), &u) != nil || u.Location == nil {
					continue
				}
				if at, ok := sent.Load(u.Location.RecordedAt); ok {
					delay := time.Since(at.(time.Time))
					mu.Lock()
					res.delays = append(res.delays, delay)
					mu.Unlock()
					received.Add(1)
				}
			}
		}()
	}
	ready.Wait()
	time.Sleep(2 * time.Second) // let the replicas' memory settle with the streams open
	for i := range before {
		after := b.scrape(ctx, i)
		n := float64(max(res.perReplica[i], 1))
		res.heap[i] = (after.heap - before[i].heap) / n
		res.rss[i] = (after.rss - before[i].rss) / n
		res.goroutines[i] = (after.goroutines - before[i].goroutines) / n
	}

	for range b.o.reports {
		for _, t := range trips {
			at := time.Now().UTC().Truncate(time.Microsecond)
			sent.Store(at.Format(time.RFC3339Nano), time.Now())
			if err := b.report(ctx, 0, t.driver, 1, at); err != nil {
				return res, err
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	res.expected = int64(b.o.streams * b.o.reports)
	for deadline := time.Now().Add(10 * time.Second); received.Load() < res.expected && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	closeStreams()
	mu.Lock()
	res.received = received.Load()
	res.delays = benchkit.Sorted(res.delays)
	mu.Unlock()
	for _, t := range trips {
		_ = b.finish(ctx, 0, t.bookedTrip)
	}
	return res, nil
}

type metrics struct{ heap, rss, goroutines, cpu float64 }

// scrape reads a replica's memory, goroutines and CPU seconds from its /metrics.
func (b *bench) scrape(ctx context.Context, replica int) metrics {
	var m metrics
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.replicas[replica]+"/metrics", nil)
	res, err := b.client.Do(req)
	if err != nil {
		return m
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	for _, line := range strings.Split(string(body), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		switch name {
		case "go_memstats_heap_inuse_bytes":
			m.heap = v
		case "process_resident_memory_bytes":
			m.rss = v
		case "go_goroutines":
			m.goroutines = v
		case "process_cpu_seconds_total":
			m.cpu = v
		}
	}
	return m
}

func (r fanOutResult) print(w io.Writer) {
	fmt.Fprintf(w, "Fan-out: %d streams over 2 replicas (%d and %d), %d trips, %d positions per trip reported on replica A\n",
		r.streams, r.perReplica[0], r.perReplica[1], r.trips, r.reports)
	fmt.Fprintf(w, "Received %d of %d: report to stream p50 %s, p99 %s, max %s\n", r.received, r.expected,
		benchkit.MS(benchkit.Percentile(r.delays, 50)), benchkit.MS(benchkit.Percentile(r.delays, 99)), benchkit.MS(benchkit.Percentile(r.delays, 100)))
	for i, name := range []string{"A", "B"} {
		fmt.Fprintf(w, "Replica %s per open stream: heap in use %+.1f KiB, resident %+.1f KiB, goroutines %+.2f\n",
			name, r.heap[i]/1024, r.rss[i]/1024, r.goroutines[i])
	}
}
