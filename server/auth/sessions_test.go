package auth

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rideapi/ride/store"
)

// Sessions of three accounts opening at once on a full replica: whatever gives way or is
// refused, the replica never holds more than its bound, and its counts are the sessions that
// still run.
func TestHoldKeepsTheReplicaBoundUnderConcurrentOpens(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "ride.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	a := New(st, time.Now, Metrics{Failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "f"}, []string{"outcome"}),
		Lookups: prometheus.NewCounter(prometheus.CounterOpts{Name: "l"})})
	const bound = 12
	a.LimitSessions(bound)
	for i := range 9 {
		a.byID[fmt.Sprintf("key_%d", i)] = &authEntry{} // known and acting: Hold reads no key
	}

	var mu sync.Mutex
	var held []context.Context
	hold := func(i int) {
		p := Principal{KeyID: fmt.Sprintf("key_%d", i%9), Account: fmt.Sprintf("acct_%d", i%3)}
		ctx, _, err := a.Hold(ctx, p)
		switch {
		case errors.Is(err, ErrReplicaFull):
		case err != nil:
			t.Error(err)
		default:
			mu.Lock()
			held = append(held, ctx)
			mu.Unlock()
		}
	}
	// The first account fills the replica; then all three open at once.
	for range bound {
		hold(0)
	}
	var wg sync.WaitGroup
	for i := range 90 {
		wg.Go(func() { hold(i) })
	}
	wg.Wait()

	running, gaveWay := 0, 0
	for _, ctx := range held {
		if errors.Is(context.Cause(ctx), ErrGaveWay) {
			gaveWay++
		} else {
			running++
		}
	}
	if gaveWay == 0 {
		t.Fatal("no session gave way to the accounts holding none")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	counted := 0
	for _, n := range a.accountSessions {
		counted += n
	}
	if a.openSessions != bound || counted != bound || running != bound {
		t.Fatalf("open %d, counted per account %d, running %d: want the bound, %d, each", a.openSessions, counted, running, bound)
	}
}
