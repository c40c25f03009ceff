// Package storetest gives test suites a database of their own on a PostgreSQL server, so that
// suites and packages can run side by side on one server without seeing each other's rows, and
// the few ways to set up and inspect a store's rows that its methods do not offer (helpers.go).
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/store/internal/testdb"
)

// NewPostgresDatabase creates a fresh, empty database on the server of baseURL and returns its
// URL and a function that drops it. An unreachable server is an error, never a skip: CI sets
// the URL precisely so that PostgreSQL is tested.
func NewPostgresDatabase(ctx context.Context, baseURL string) (string, func(), error) {
	return testdb.NewPostgresDatabase(ctx, baseURL)
}

// Open opens the store at url for a test or benchmark, migrated, and closes it when tb ends.
func Open(tb testing.TB, url string) *store.Store {
	tb.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	if err := st.Migrate(ctx); err != nil {
		tb.Fatal(err)
	}
	return st
}

// ProcessCPU is the CPU time (user and system) this process has spent so far, for benchmarks
// that report CPU per operation beside the wall clock.
func ProcessCPU() time.Duration { return testdb.ProcessCPU() }
