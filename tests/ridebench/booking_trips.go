package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// book records a trip booked on the server at addr, to be completed after the run.
func (f *fleet) book(addr, tripID string) {
	f.mu.Lock()
	f.booked[addr] = append(f.booked[addr], tripID)
	f.mu.Unlock()
}

// complete moves every trip booked on addr to in_progress, then completed, as the admin of
// key, with concurrency clients; it returns how many it completed.
func (f *fleet) complete(ctx context.Context, addr, key string, concurrency int) (int, error) {
	f.mu.Lock()
	trips := f.booked[addr]
	delete(f.booked, addr)
	f.mu.Unlock()
	return completeTrips(ctx, addr, key, trips, concurrency)
}

// completeTrips moves trips to in_progress, then completed, through the server at addr.
func completeTrips(ctx context.Context, addr, key string, trips []string, concurrency int) (int, error) {
	var next, done atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			var conn keepAlive
			defer conn.close()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(trips) || ctx.Err() != nil {
					return
				}
				err := moveTrip(&conn, addr, key, trips[i])
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	return int(done.Load()), firstErr
}

func moveTrip(conn *keepAlive, addr, key, tripID string) error {
	for _, status := range []string{"in_progress", "completed"} {
		body, _ := json.Marshal(map[string]string{"status": status})
		req, _ := http.NewRequest(http.MethodPut, "http://"+addr+"/v1/trips/"+tripID, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		code, answer, err := conn.roundTrip(req)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("PUT /v1/trips/%s %s: %d %s", tripID, status, code, bytes.TrimSpace(answer))
		}
	}
	return nil
}

// completeLeftovers completes the trips an interrupted run booked and left active (every
// active trip of the data set was created at benchEpoch or before, every booking after it).
func completeLeftovers(ctx context.Context, db *bookingDB, addr, key string, concurrency int) error {
	conn, err := pgx.Connect(ctx, db.url)
	if err != nil {
		return err
	}
	rows, err := conn.Query(ctx, `SELECT id FROM trips WHERE status IN ('accepted', 'arriving', 'in_progress')
		AND created_at > $1`, benchEpoch)
	var trips []string
	if err == nil {
		trips, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	conn.Close(ctx)
	if err != nil || len(trips) == 0 {
		return err
	}
	n, err := completeTrips(ctx, addr, key, trips, concurrency)
	log.Printf("booking: completed %d trips an earlier run left active on %s", n, addr)
	return err
}
