package benchkit

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net/http"

	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// Call sends a JSON request to baseURL+path with key as its bearer token (a POST with a fresh
// Idempotency-Key, as the document asks of clients) and decodes a 2xx answer into out (when
// not nil); any other status is an error carrying the answer.
func Call(ctx context.Context, client *http.Client, baseURL, method, path, key string, body, out any) error {
	return send(ctx, client, baseURL, method, path, key, method == http.MethodPost, body, out)
}

// CallWithoutKey is Call without an Idempotency-Key, for the POSTs that need none: a driver's
// position report, which changes nothing when repeated, as a driver app sends it.
func CallWithoutKey(ctx context.Context, client *http.Client, baseURL, method, path, key string, body, out any) error {
	return send(ctx, client, baseURL, method, path, key, false, body, out)
}

func send(ctx context.Context, client *http.Client, baseURL, method, path, key string, idempotent bool, body, out any) error {
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, baseURL+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idempotent {
		var id [16]byte
		_, _ = rand.Read(id[:])
		req.Header.Set("Idempotency-Key", hex.EncodeToString(id[:]))
	}
	res, err := client.Do(req)
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

// City is the benchmarks' city: large enough that positions spread.
var City = store.City{
	ID: "bench-city", Name: "Benchville", CenterLat: 37.7749, CenterLng: -122.4194, RadiusMeters: 25_000,
	Currency: "usd", BaseFare: 250, PerKm: 120, PerMinute: 30, MinimumFare: 700,
}

// PointNear is a random point within meters of the city's center.
func PointNear(r *mrand.Rand, c store.City, meters float64) ride.Point {
	const metersPerDegree = 111_195.0
	d, a := meters*math.Sqrt(r.Float64()), 2*math.Pi*r.Float64()
	return ride.Point{
		Lat: c.CenterLat + d*math.Cos(a)/metersPerDegree,
		Lng: c.CenterLng + d*math.Sin(a)/(metersPerDegree*math.Cos(c.CenterLat*math.Pi/180)),
	}
}
