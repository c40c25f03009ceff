package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rideapi/ride/server/app"

	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/store/storetest"
)

// BenchmarkForeignTripNotFound measures what THREAT-MODEL.md calls an oracle: an admin of one
// account asks GET /v1/trips/{id} for trips of another account (foreign) and for ids that name
// no trip (random), in turns, through the real server. Both are 404 with the same body; the
// benchmark reports each kind's median time and their ratio, on SQLite and, with
// TEST_DATABASE_URL, on PostgreSQL:
//
//	TEST_DATABASE_URL=postgres://… go test -run XXX -bench ForeignTripNotFound ./server/
func BenchmarkForeignTripNotFound(b *testing.B) {
	for _, name := range []string{"sqlite", "postgres"} {
		postgres := name == "postgres"
		if postgres && os.Getenv("TEST_DATABASE_URL") == "" {
			continue
		}
		b.Run(name, func(b *testing.B) {
			h, key, foreign := oracleFixture(b, benchDatabaseURL(b, postgres))
			random := make([]string, len(foreign))
			for i := range random {
				random[i] = ride.NewID(ride.PrefixTrip)
			}
			var asForeign, asRandom []time.Duration
			ask := func(id string) time.Duration {
				req := httptest.NewRequest(http.MethodGet, "/v1/trips/"+id, http.NoBody)
				req.Header.Set("Authorization", "Bearer "+key)
				w := httptest.NewRecorder()
				start := time.Now()
				h.ServeHTTP(w, req)
				took := time.Since(start)
				if w.Code != http.StatusNotFound {
					b.Fatalf("%s: %d %s", id, w.Code, w.Body.String())
				}
				return took
			}
			i := 0
			for b.Loop() {
				// In turns, so that both kinds meet the same caches and the same load.
				n := i % len(foreign)
				asForeign = append(asForeign, ask(foreign[n]))
				asRandom = append(asRandom, ask(random[n]))
				i++
			}
			f, r := median(asForeign), median(asRandom)
			b.ReportMetric(float64(f.Microseconds()), "µs-foreign-median")
			b.ReportMetric(float64(r.Microseconds()), "µs-random-median")
			b.ReportMetric(float64(f)/float64(r), "foreign/random")
		})
	}
}

// oracleFixture is a server over the demo data at url, a key of a new account's admin, and
// the ids of trips of the demo's accounts.
func oracleFixture(b *testing.B, url string) (http.Handler, string, []string) {
	b.Helper()
	ctx := context.Background()
	s, st := benchServer(b, url, true)
	key, _, err := app.NewAPIKey(ctx, st, app.APIKeyParams{Role: auth.RoleAdmin, Account: "acct_oracle_" + strings.ToLower(rand.Text()[:8])}, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	page, err := st.ListTrips(ctx, store.TripListParams{Limit: 100, Filter: store.TripFilter{Account: auth.DefaultAccount}})
	if err != nil || len(page.Trips) == 0 {
		b.Fatal("no demo trip", err)
	}
	ids := make([]string, len(page.Trips))
	for i, t := range page.Trips {
		ids[i] = t.ID
	}
	return s, key, ids
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkUnknownKeyFlood sends well-formed keys that no account has, from 8 client addresses
// at once, through the real server on SQLite, and reports the database reads they cost: look-ups
// of a key by its hash, and reads of the key revision (the replica's refreshes of the keys it
// knows), per second of flood. THREAT-MODEL.md's floods that lock out the innocent:
//
//	go test -run XXX -bench UnknownKeyFlood ./server/
func BenchmarkUnknownKeyFlood(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite://"+filepath.Join(b.TempDir(), "flood.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	if err := st.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	var lookups, refreshes atomic.Int64
	err = storetest.OnReads(st, "flood:count", func(s storetest.Statement) {
		switch {
		case strings.Contains(s.SQL, "hash ="):
			lookups.Add(1)
		case strings.Contains(s.SQL, "FROM api_key_changes"):
			refreshes.Add(1)
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	s := benchServerOn(b, st)

	var next atomic.Int64
	lookups.Store(0)
	refreshes.Store(0)
	start := time.Now()
	b.SetParallelism(4) // 8 clients on 2 cores
	b.RunParallel(func(pb *testing.PB) {
		address := "10.0.0." + strconv.Itoa(int(next.Add(1))%8+1) + ":40000"
		for pb.Next() {
			var raw [32]byte
			_, _ = rand.Read(raw[:])
			req := httptest.NewRequest(http.MethodGet, "/v1/trips?limit=1", http.NoBody)
			req.RemoteAddr = address
			req.Header.Set("Authorization", "Bearer rk_"+base64.RawURLEncoding.EncodeToString(raw[:]))
			w := httptest.NewRecorder()
			s.ServeHTTP(w, req)
			if w.Code != http.StatusUnauthorized && w.Code != http.StatusTooManyRequests {
				b.Errorf("unknown key: %d %s", w.Code, w.Body.String())
				return
			}
		}
	})
	seconds := time.Since(start).Seconds()
	b.ReportMetric(float64(lookups.Load())/seconds, "lookups/s")
	b.ReportMetric(float64(refreshes.Load())/seconds, "revision-reads/s")
	b.ReportMetric(float64(b.N)/seconds, "refusals/s")
}
