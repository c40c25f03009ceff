// Package benchkit is what the benchmarks that drive the real server binary share: starting a
// replica of it on a database, and reading latency percentiles.
package benchkit

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"time"
)

// StartReplica runs the server binary on addr, serving the database at dbURL with rate limits
// and demo data off and env added to its environment, and waits until it is ready (migrated).
// The returned function stops it (SIGINT, then a kill after 10 s) and waits for it to exit.
func StartReplica(ctx context.Context, binary, addr, dbURL string, env ...string) (stop func(), err error) {
	if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
		c.Close()
		return nil, fmt.Errorf("%s is already taken: stop what listens there or pass another address", addr)
	}
	cmd := exec.CommandContext(ctx, binary)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "RIDE_ADDR="+addr, "RIDE_DEMO_DATA=false",
		"RIDE_RATE_LIMIT_READ=0", "RIDE_RATE_LIMIT_WRITE=0", "RIDE_CURSOR_SECRET=benchmark-cursor-secret-0123456789")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard // the request log of thousands of requests
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w (build it with go build -o %s ./server/cmd/rideapi)", binary, err, binary)
	}
	stop = func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if res, err := http.Get("http://" + addr + "/readyz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return stop, nil
			}
		}
	}
	stop()
	return nil, fmt.Errorf("replica on %s not ready within 30 s", addr)
}

// Percentile is the p-th percentile (0–100) of sorted durations; 0 when there are none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(p/100*float64(len(sorted)-1))]
}

// Sorted is a sorted copy of d.
func Sorted(d []time.Duration) []time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s
}

// MS formats d in milliseconds with one decimal.
func MS(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
