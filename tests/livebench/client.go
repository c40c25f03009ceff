package main

import (
	"context"
	"net/http"
	"time"

	"github.com/rideapi/ride/tests/internal/benchkit"
)

// call sends a JSON request to a replica and decodes a 2xx answer into out (when not nil).
func (b *bench) call(ctx context.Context, replica int, method, path, key string, body, out any) error {
	return benchkit.Call(ctx, b.client, b.replicas[replica], method, path, key, body, out)
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
	key := b.byID[t.Driver.ID].Key
	for _, status := range []string{"in_progress", "completed"} {
		if err := b.call(ctx, replica, http.MethodPut, "/v1/trips/"+t.ID, key, map[string]any{"status": status}, nil); err != nil {
			return err
		}
	}
	return nil
}

// report posts positions of a driver, recorded at at and just before it, without an
// Idempotency-Key, as driver apps do: a repeated report changes nothing.
func (b *bench) report(ctx context.Context, replica int, d benchkit.Driver, n int, at time.Time) error {
	positions := make([]map[string]any, n)
	for i := range positions {
		positions[i] = map[string]any{
			"lat": d.At.Lat + float64(i)*1e-5, "lng": d.At.Lng, "heading": 90, "speed": 8.5,
			"recorded_at": at.Add(-time.Duration(n-1-i) * time.Millisecond).UTC().Format(time.RFC3339Nano),
		}
	}
	return benchkit.CallWithoutKey(ctx, b.client, b.replicas[replica], http.MethodPost, "/v1/drivers/"+d.ID+"/positions",
		d.Key, map[string]any{"positions": positions}, nil)
}
