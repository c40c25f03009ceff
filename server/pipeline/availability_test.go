package pipeline

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// A key whose release fails because the database went away again is released at its next
// answer: its request's 503 said the key is free to reuse, so it must not stay locked until
// its lease ends. A release that fails for another reason is logged and not tried again.
func TestOutageReleasesAKeyAgainWhenTheDatabaseGoesAwayMeanwhile(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	type call struct{ key string }
	calls := make(chan call, 8)
	var mu sync.Mutex // two probes may release at once: one started while the other releases
	failures := map[string][]error{
		"away-again": {&pgconn.PgError{Code: "57P01"}}, // the backend killed: released at the next answer
		"refused":    {errors.New("boom")},             // not the database's absence: logged only
	}
	o := &outage{
		ping: func(context.Context) error { return nil },
		release: func(_ context.Context, account, key, owner string) error {
			calls <- call{key}
			mu.Lock()
			defer mu.Unlock()
			if errs := failures[key]; len(errs) > 0 {
				failures[key] = errs[1:]
				return errs[0]
			}
			return nil
		},
		log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		stop: stop,
	}
	o.releaseLater("acct_default", "refused", "owner-1")
	o.releaseLater("acct_default", "away-again", "owner-2") // the same probe, a moment later or not

	seen := map[string]int{}
	deadline := time.After(30 * time.Second) // a bound against a hang, never what decides a pass
	for seen["away-again"] < 2 || seen["refused"] < 1 {
		select {
		case c := <-calls:
			seen[c.key]++
		case <-deadline:
			t.Fatalf("released %v; want away-again tried again after the database went away meanwhile", seen)
		}
	}
	if seen["refused"] != 1 {
		t.Errorf("a release refused for another reason was tried %d times, want once", seen["refused"])
	}
}
