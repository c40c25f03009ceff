package demo_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/rideapi/ride/server/demo"
	"github.com/rideapi/ride/store"
)

// BenchmarkSeed measures what a first `go run ./server/cmd/rideapi` waits for on the default
// engine: go test -run XXX -bench Seed ./server/demo/
func BenchmarkSeed(b *testing.B) {
	ctx := context.Background()
	now := time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		st, err := store.Open(ctx, "sqlite://"+filepath.Join(b.TempDir(), "ride.db"))
		if err != nil {
			b.Fatal(err)
		}
		if err := st.Migrate(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := demo.Seed(ctx, st, now); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		st.Close()
	}
}
