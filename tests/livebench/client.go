package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"
)

// call sends a JSON request to a replica and decodes a 2xx answer into out (when not nil).
func (b *bench) call(ctx context.Context, replica int, method, path, key string, body, out any) error {
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.replicas[replica]+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if method == http.MethodPost {
		var id [16]byte
		_, _ = rand.Read(id[:])
		req.Header.Set("Idempotency-Key", hex.EncodeToString(id[:]))
	}
	res, err := b.client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

type bookedTrip struct {
	ID     string `json:"id"`
	Driver struct {
		ID string `json:"id"`
	} `json:"driver_summary"`
}

// book estimates and books a trip for the rider of riderKey, on a replica.
func (b *bench) book(ctx context.Context, replica int, riderKey string) (bookedTrip, time.Duration, error) {
	c := b.city
	body := map[string]any{
		"origin":      map[string]any{"lat": c.CenterLat + 0.01, "lng": c.CenterLng},
		"destination": map[string]any{"lat": c.CenterLat - 0.02, "lng": c.CenterLng - 0.01},
		"ride_type":   "economy",
	}
	var est struct {
		ID string `json:"estimate_id"`
	}
	if err := b.call(ctx, replica, http.MethodPost, "/v1/fare-estimates", riderKey, body, &est); err != nil {
		return bookedTrip{}, 0, err
	}
	var t bookedTrip
	start := time.Now()
	err := b.call(ctx, replica, http.MethodPost, "/v1/rides", riderKey, map[string]any{"estimate_id": est.ID}, &t)
	return t, time.Since(start), err
}

// finish completes a trip as its driver.
func (b *bench) finish(ctx context.Context, replica int, t bookedTrip) error {
	key := b.byID[t.Driver.ID].key
	for _, status := range []string{"in_progress", "completed"} {
		if err := b.call(ctx, replica, http.MethodPut, "/v1/trips/"+t.ID, key, map[string]any{"status": status}, nil); err != nil {
			return err
		}
	}
	return nil
}

// report posts positions of a driver, recorded at at and just before it.
func (b *bench) report(ctx context.Context, replica int, d benchDriver, n int, at time.Time) error {
	positions := make([]map[string]any, n)
	for i := range positions {
		positions[i] = map[string]any{
			"lat": d.at.Lat + float64(i)*1e-5, "lng": d.at.Lng, "heading": 90, "speed": 8.5,
			"recorded_at": at.Add(-time.Duration(n-1-i) * time.Millisecond).UTC().Format(time.RFC3339Nano),
		}
	}
	return b.call(ctx, replica, http.MethodPost, "/v1/drivers/"+d.id+"/positions", d.key, map[string]any{"positions": positions}, nil)
}

// percentile is the p-th percentile (0–100) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p / 100 * float64(len(sorted)-1))
	return sorted[i]
}

func sortedCopy(d []time.Duration) []time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
