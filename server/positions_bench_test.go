package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rideapi/ride/server/app"

	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/store/storetest"
)

// BenchmarkPositionReport is POST /v1/drivers/{driverId}/positions with 10 positions, through
// the real server on PostgreSQL, from 16 drivers at once (as tests/livebench reports), with and
// without an Idempotency-Key. Besides the time per report it reports the process's CPU time
// per report (cpu-µs/report): the server's work, with PostgreSQL's own outside it.
//
//	TEST_DATABASE_URL=postgres://… go test -run XXX -bench PositionReport -cpuprofile cpu.out ./server/
func BenchmarkPositionReport(b *testing.B) {
	if os.Getenv("TEST_DATABASE_URL") == "" {
		b.Skip("TEST_DATABASE_URL is not set")
	}
	ctx := context.Background()
	s, st := benchServer(b, benchDatabaseURL(b, true), false)

	now := time.Now()
	city, err := st.CreateCity(ctx, store.City{ID: "bench-city", Name: "Benchville", CenterLat: 37.7749, CenterLng: -122.4194,
		RadiusMeters: 25_000, Currency: "usd", BaseFare: 250, PerKm: 120, PerMinute: 30, MinimumFare: 700, CreatedAt: now})
	if err != nil {
		b.Fatal(err)
	}
	type driver struct{ id, key string }
	var drivers []driver
	for range 200 {
		d, err := st.CreateDriver(ctx, store.Driver{ID: ride.NewID(ride.PrefixDriver), Name: "Bench Driver", Rating: 4.8,
			VehicleMake: "Toyota", VehicleModel: "Prius", VehicleColor: "blue", VehiclePlate: "BENCH1",
			City: city.ID, Lat: city.CenterLat, Lng: city.CenterLng, Available: true, Online: true, PositionAt: &now,
			CreatedAt: now, UpdatedAt: now})
		if err != nil {
			b.Fatal(err)
		}
		key, _, err := app.NewAPIKey(ctx, st, app.APIKeyParams{Role: auth.RoleDriver, Subject: d.ID}, now)
		if err != nil {
			b.Fatal(err)
		}
		drivers = append(drivers, driver{id: d.ID, key: key})
	}

	// report is the body of 10 positions recorded just before at.
	report := func(at time.Time) []byte {
		var body bytes.Buffer
		body.WriteString(`{"positions":[`)
		for i := range 10 {
			if i > 0 {
				body.WriteByte(',')
			}
			fmt.Fprintf(&body, `{"lat":%.6f,"lng":-122.4194,"heading":90,"speed":8.5,"recorded_at":%q}`,
				37.7749+float64(i)*1e-5, at.Add(time.Duration(i-9)*time.Millisecond).UTC().Format(time.RFC3339Nano))
		}
		body.WriteString(`]}`)
		return body.Bytes()
	}
	for _, withKey := range []bool{false, true} {
		name := "without_key"
		if withKey {
			name = "idempotency_key"
		}
		b.Run(name, func(b *testing.B) {
			var next atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
			cpu := storetest.ProcessCPU()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					d := drivers[next.Add(1)%int64(len(drivers))]
					req := httptest.NewRequest(http.MethodPost, "/v1/drivers/"+d.id+"/positions", bytes.NewReader(report(time.Now())))
					req.Header.Set("Authorization", "Bearer "+d.key)
					req.Header.Set("Content-Type", "application/json")
					if withKey {
						var k [16]byte
						_, _ = rand.Read(k[:])
						req.Header.Set("Idempotency-Key", hex.EncodeToString(k[:]))
					}
					w := httptest.NewRecorder()
					s.ServeHTTP(w, req)
					if w.Code != http.StatusOK {
						b.Errorf("%d %s", w.Code, w.Body)
						return
					}
				}
			})
			b.ReportMetric(float64((storetest.ProcessCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/report")
		})
	}
}
