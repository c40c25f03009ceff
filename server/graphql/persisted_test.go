package graphql

import (
	"strconv"
	"testing"
	"time"
)

// One account registering many documents never pushes another account's out of the cache.
func TestPersistedQueryCacheIsBoundedPerAccount(t *testing.T) {
	now := time.Now()
	p := newPersistedQueries(func() time.Time { return now })
	p.remember("acct_b", "b1", "{ b }", now, true)
	for i := range persistedQueryCacheMax + 50 {
		p.remember("acct_a", "a"+strconv.Itoa(i), "{ a }", now, true)
	}
	if _, ok := p.cached("acct_b", "b1"); !ok {
		t.Fatal("another account's registrations evicted acct_b's")
	}
	if got := len(p.cache["acct_a"]); got != persistedQueryCacheMax {
		t.Fatalf("acct_a holds %d entries, want the bound %d", got, persistedQueryCacheMax)
	}
	if _, ok := p.cached("acct_a", "a"+strconv.Itoa(persistedQueryCacheMax+49)); !ok {
		t.Fatal("the latest registration is not cached")
	}
}
