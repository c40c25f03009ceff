package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rideapi/ride/server/app"

	"github.com/rideapi/ride/server"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/store/storetest"
)

// BenchmarkLargestInputs measures the largest input of each kind a caller may send, through
// the real handler (gate, authentication, validation, store):
//
//   - graphql_repeated_fields: one field repeated 999 times under one driver, 1,000 fields
//     as sent, well inside the 10,000-character limit;
//   - graphql_largest_document: 1,000 distinct fields (999 aliases of `name`), the most a
//     document may run;
//   - graphql_new_largest_documents: the same, a different document every time, which the
//     server analyses and caches anew: heap_after_MB is what its document cache holds once
//     full of one account's longest documents (its budget: 64 KiB of an account's document text);
//   - json_body_1mib: a 1 MiB body of valid position reports, far more than a batch may hold;
//   - error_list_1mib: a 1 MiB body of unknown members, each of them a finding;
//   - error_list_most_findings: the body with the most findings that is not refused before
//     validation: 1,000 position reports with four faults each.
//
// Besides time and allocation per request it reports the answer's size (answer_B) and the
// heap still in use after the run and a collection (heap_after_MB), which tells whether the
// memory a burst took comes back. It runs on PostgreSQL when TEST_DATABASE_URL is set, on
// SQLite otherwise:
//
//	go test -run XXX -bench LargestInputs -benchmem ./tests/
func BenchmarkLargestInputs(b *testing.B) {
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
	b.Cleanup(func() { _ = srv.Close() })
	trip, riderKey := benchTrip(b, st)
	driverKey, _, err := app.NewAPIKey(ctx, st, app.APIKeyParams{Role: auth.RoleDriver, Subject: trip.DriverID}, time.Now())
	if err != nil {
		b.Fatal(err)
	}

	repeated, _ := json.Marshal(map[string]any{"query": `{ driver(id: "` + trip.DriverID + `") {` + strings.Repeat(" name", 999) + ` } }`})
	var aliases strings.Builder
	for i := range 999 {
		fmt.Fprintf(&aliases, " a%d:name", i)
	}
	largest, _ := json.Marshal(map[string]any{"query": `{ driver(id: "` + trip.DriverID + `") {` + aliases.String() + ` } }`})
	var sent int
	newLargest := func() []byte { // the largest document, after a comment that numbers it
		sent++
		doc, _ := json.Marshal(map[string]any{"query": fmt.Sprintf("# %d\n", sent) + `{ driver(id: "` + trip.DriverID + `") {` + aliases.String() + ` } }`})
		return doc
	}

	var positions bytes.Buffer
	positions.WriteString(`{"positions":[`)
	for i := 0; positions.Len() < 1<<20-200; i++ {
		if i > 0 {
			positions.WriteByte(',')
		}
		fmt.Fprintf(&positions, `{"lat":37.7%04d,"lng":-122.4,"recorded_at":"2026-01-01T00:00:00Z"}`, i%10000)
	}
	positions.WriteString(`]}`)

	var unknown bytes.Buffer
	unknown.WriteString(`{"ride_type":"economy"`)
	for i := 0; unknown.Len() < 1<<20-40; i++ {
		fmt.Fprintf(&unknown, `,"m%d":1`, i)
	}
	unknown.WriteString(`}`)

	var faulty bytes.Buffer
	faulty.WriteString(`{"positions":[`)
	for i := range 1000 {
		if i > 0 {
			faulty.WriteByte(',')
		}
		faulty.WriteString(`{"lat":"north","lng":500,"recorded_at":"yesterday","altitude":1}`)
	}
	faulty.WriteString(`]}`)

	cases := []struct {
		name, key, path string
		body            []byte
		status          int
		next            func() []byte // a new body for every request, when set
	}{
		{"graphql_repeated_fields", riderKey, "/v1/graphql", repeated, http.StatusOK, nil},
		{"graphql_largest_document", riderKey, "/v1/graphql", largest, http.StatusOK, nil},
		{"graphql_new_largest_documents", riderKey, "/v1/graphql", newLargest(), http.StatusOK, newLargest},
		{"json_body_1mib", driverKey, "/v1/drivers/" + trip.DriverID + "/positions", positions.Bytes(), http.StatusBadRequest, nil},
		{"error_list_1mib", riderKey, "/v1/fare-estimates", unknown.Bytes(), http.StatusBadRequest, nil},
		{"error_list_most_findings", driverKey, "/v1/drivers/" + trip.DriverID + "/positions", faulty.Bytes(), http.StatusBadRequest, nil},
	}
	for _, c := range cases {
		b.Run(engine+"/"+c.name, func(b *testing.B) {
			if len(c.body) > 1<<20 {
				b.Fatalf("the body is %d bytes, over the limit", len(c.body))
			}
			var answer int
			b.ReportAllocs()
			for b.Loop() {
				body := c.body
				if c.next != nil {
					body = c.next()
				}
				req := httptest.NewRequest(http.MethodPost, c.path, bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+c.key)
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				srv.ServeHTTP(rec, req)
				if rec.Code != c.status {
					b.Fatalf("answered %d, want %d: %.300s", rec.Code, c.status, rec.Body.String())
				}
				answer = rec.Body.Len()
			}
			b.StopTimer()
			runtime.GC()
			var mem runtime.MemStats
			runtime.ReadMemStats(&mem)
			b.ReportMetric(float64(answer), "answer_B")
			b.ReportMetric(float64(mem.HeapInuse)/(1<<20), "heap_after_MB")
		})
	}
}
