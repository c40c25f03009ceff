package server

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rideapi/ride/server/demo"
	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/store/storetest"
)

// benchDatabaseURL is a new database for a benchmark: a SQLite file, or on PostgreSQL
// (TEST_DATABASE_URL) a database of its own, dropped when the benchmark ends.
func benchDatabaseURL(b *testing.B, postgres bool) string {
	b.Helper()
	if !postgres {
		return "sqlite://" + filepath.Join(b.TempDir(), "bench.db")
	}
	url, drop, err := storetest.NewPostgresDatabase(context.Background(), os.Getenv("TEST_DATABASE_URL"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(drop)
	return url
}

// benchServer is the server over a migrated store at url, with the demo data when seeded,
// logging nowhere.
func benchServer(b *testing.B, url string, seeded bool) (*Server, *store.Store) {
	b.Helper()
	st := storetest.Open(b, url)
	if seeded {
		if _, err := demo.Seed(context.Background(), st, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	return benchServerOn(b, st), st
}

// benchServerOn is the server over st, logging nowhere; it closes when the benchmark ends.
func benchServerOn(b *testing.B, st *store.Store) *Server {
	b.Helper()
	s, err := New(Config{CursorSecret: []byte("bench-cursor-secret-0123456789")},
		Deps{Store: st, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}
