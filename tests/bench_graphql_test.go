package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rideapi/ride/server/app"

	"github.com/rideapi/ride/server"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/store/storetest"
)

// BenchmarkTripRead measures the seed's GraphQL query next to GET /v1/trips/{id} through the
// real handler (gate, authentication, caching layer, store), on PostgreSQL when
// TEST_DATABASE_URL is set and on SQLite otherwise, in the same run:
//
//	TEST_DATABASE_URL=postgres://… go test -run XXX -bench TripRead -benchmem ./tests/
//
// Both answer the same trip to its rider; req/s is the sequential rate (1 s / latency).
func BenchmarkTripRead(b *testing.B) {
	ctx := context.Background()
	engine, url := "sqlite", "sqlite://"+filepath.Join(b.TempDir(), "bench.db")
	if base := os.Getenv("TEST_DATABASE_URL"); base != "" {
		var drop func()
		var err error
		engine = "postgres"
		url, drop, err = storetest.NewPostgresDatabase(ctx, base)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(drop)
	}
	st := storetest.Open(b, url)
	srv, err := server.New(server.Config{CursorSecret: []byte("bench-cursor-secret-0123456789")},
		server.Deps{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	trip, riderKey := benchTrip(b, st)

	variables := map[string]any{"id": trip.ID}
	seed, _ := json.Marshal(map[string]any{"query": seedQuery, "variables": variables})
	persisted, _ := json.Marshal(map[string]any{"variables": variables, "extensions": map[string]any{
		"persistedQuery": map[string]any{"version": 1, "sha256Hash": sha256Hex(seedQuery)}}})
	register, _ := json.Marshal(map[string]any{"query": seedQuery, "variables": variables, "extensions": map[string]any{
		"persistedQuery": map[string]any{"version": 1, "sha256Hash": sha256Hex(seedQuery)}}})
	serve(b, srv, riderKey, http.MethodPost, "/v1/graphql", register) // registers the hash

	cases := []struct {
		name, method, path string
		body               []byte
	}{
		{"rest_get_trip", http.MethodGet, "/v1/trips/" + trip.ID, nil},
		{"graphql_post_seed_query", http.MethodPost, "/v1/graphql", seed},
		{"graphql_get_seed_query", http.MethodGet, "/v1/graphql?" + gqlParams(map[string]string{
			"query": seedQuery, "variables": `{"id":"` + trip.ID + `"}`}), nil},
		{"graphql_post_persisted_hash", http.MethodPost, "/v1/graphql", persisted},
	}
	for _, c := range cases {
		b.Run(engine+"/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				serve(b, srv, riderKey, c.method, c.path, c.body)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}

func serve(b *testing.B, srv http.Handler, key, method, path string, body []byte) {
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	req := httptest.NewRequest(method, path, reader)
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || bytes.Contains(rec.Body.Bytes(), []byte(`"errors"`)) {
		b.Fatalf("%s %s answered %d: %s", method, path, rec.Code, rec.Body.String())
	}
}

// benchTrip stores one trip with its city, driver and rider, and a key of its rider.
func benchTrip(b *testing.B, st *store.Store) (store.Trip, string) {
	ctx := context.Background()
	now := time.Now().UTC()
	city, err := st.CreateCity(ctx, store.City{ID: "bench-city", Name: "Bench", CenterLat: 37.77, CenterLng: -122.42,
		RadiusMeters: 30_000, Currency: "usd", BaseFare: 250, PerKm: 120, PerMinute: 30, MinimumFare: 700, CreatedAt: now})
	if err != nil {
		b.Fatal(err)
	}
	driver, err := st.CreateDriver(ctx, store.Driver{ID: ride.NewID(ride.PrefixDriver), Name: "Bench Driver", Rating: 4.8,
		Photo: "https://cdn.ride.example.com/drivers/bench.jpg", VehicleMake: "Toyota", VehicleModel: "Prius",
		VehicleColor: "blue", VehiclePlate: "BENCH1", City: city.ID, Available: true, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		b.Fatal(err)
	}
	rider, err := st.CreateRider(ctx, store.Rider{ID: ride.NewID(ride.PrefixRider), Name: "Bench Rider", Rating: 4.9, CreatedAt: now})
	if err != nil {
		b.Fatal(err)
	}
	eta := 4
	trip, err := st.CreateTrip(ctx, store.Trip{ID: ride.NewID(ride.PrefixTrip), Status: store.TripStatusArriving,
		RideType: store.RideTypeEconomy, City: city.ID, RiderID: rider.ID, DriverID: driver.ID,
		PickupLat: 37.79, PickupLng: -122.39, DropoffLat: 37.76, DropoffLng: -122.42, PickupTime: now.Add(4 * time.Minute),
		FareTotal: 1850, FareCurrency: "usd", ETAMinutes: &eta, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		b.Fatal(err)
	}
	key, _, err := app.NewAPIKey(ctx, st, app.APIKeyParams{Role: auth.RoleRider, Subject: rider.ID}, now)
	if err != nil {
		b.Fatal(err)
	}
	return trip, key
}
