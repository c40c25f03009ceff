package auth

import (
	"context"
	"time"

	"github.com/rideapi/ride/store"
)

// used records a use at now; it writes memory only when the second changed, so that a key
// used by many requests at once does not bounce one cache line between cores.
func (e *authEntry) used(now time.Time) {
	at := now.UnixMicro()
	if at-e.lastUse.Load() >= int64(time.Second/time.Microsecond) {
		e.lastUse.Store(at)
	}
}

// writeLastUses writes the uses not yet written, at most one a minute per key.
func (a *Authenticator) writeLastUses(ctx context.Context) {
	var uses []store.APIKeyUse
	var entries []*authEntry
	a.mu.RLock()
	for _, e := range a.known {
		last, flushed := e.lastUse.Load(), e.flushedUse.Load()
		if last > flushed && (flushed == 0 || last-flushed >= lastUseWriteInterval.Microseconds()) {
			uses = append(uses, store.APIKeyUse{ID: e.principal.KeyID, At: time.UnixMicro(last)})
			entries = append(entries, e)
		}
	}
	a.mu.RUnlock()
	if len(uses) == 0 {
		return
	}
	if err := a.store.TouchAPIKeys(ctx, uses); err != nil {
		return // tried again on the next tick
	}
	for i, e := range entries {
		e.flushedUse.Store(uses[i].At.UnixMicro())
	}
}
