package store

import (
	"context"
	"time"
)

// Trip updates are the live state of trips (status, ETA, the driver's position) on their way
// to the streams that follow them on every replica. They are published inside the
// transaction that made the change and reach followers when, and only if, it commits.
//
// On PostgreSQL an update is a notification on tripUpdatesChannel: delivered in commit order
// to every listening connection, and never stored. On SQLite it is a row of trip_updates
// (migration 00009) that every process reads in seq order; rows older than
// tripUpdatesKeep are purged.

// tripUpdatesChannel is the PostgreSQL notification channel of trip updates.
const tripUpdatesChannel = "ride_trip_updates"

const (
	// tripUpdatesPoll is how often an SQLite follower reads new updates.
	tripUpdatesPoll = 100 * time.Millisecond
	// tripUpdatesKeep is how long SQLite keeps an update for followers to read.
	tripUpdatesKeep = 5 * time.Minute
	// tripUpdatesBatch bounds the updates an SQLite follower reads at once.
	tripUpdatesBatch = 500
)

// PublishTripUpdate sends payload, a trip's live state, to every follower of trip updates
// once the transaction of s commits (at once outside a transaction). A payload is at most a
// few hundred bytes; PostgreSQL takes up to 8,000.
func (s *Store) PublishTripUpdate(ctx context.Context, payload []byte, at time.Time) error {
	if s.engine == EnginePostgres {
		return interpretError(s.conn(ctx).Exec("SELECT pg_notify(?, ?)", tripUpdatesChannel, string(payload)).Error)
	}
	return interpretError(s.conn(ctx).Exec("INSERT INTO trip_updates (payload, created_at) VALUES (?, ?)",
		string(payload), utcMicro(at)).Error)
}

// FollowTripUpdates calls fn with every trip update published from now on, in commit order,
// until ctx ends; then it returns nil. After a lost connection (PostgreSQL) it calls fn with
// an empty payload: updates may have been missed, and followers should read the current state.
func (s *Store) FollowTripUpdates(ctx context.Context, fn func(payload string)) error {
	if s.sqlDB == nil {
		return nil // a transaction-scoped Store follows nothing
	}
	if s.engine == EnginePostgres {
		s.listen(ctx, tripUpdatesChannel, fn, func() { fn("") })
		return nil
	}
	return s.pollTripUpdates(ctx, fn)
}

// pollTripUpdates is FollowTripUpdates on SQLite.
func (s *Store) pollTripUpdates(ctx context.Context, fn func(payload string)) error {
	var last int64
	if err := s.conn(ctx).Raw("SELECT COALESCE(MAX(seq), 0) FROM trip_updates").Scan(&last).Error; err != nil && ctx.Err() == nil {
		fn("")
	}
	ticker := time.NewTicker(tripUpdatesPoll)
	defer ticker.Stop()
	purged := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		var rows []struct {
			Seq     int64
			Payload string
		}
		err := s.conn(ctx).Raw("SELECT seq, payload FROM trip_updates WHERE seq > ? ORDER BY seq LIMIT ?",
			last, tripUpdatesBatch).Scan(&rows).Error
		if err != nil {
			continue // the next tick reads them
		}
		for _, r := range rows {
			last = r.Seq
			fn(r.Payload)
		}
		if time.Since(purged) > tripUpdatesKeep/5 {
			purged = time.Now()
			_ = s.conn(ctx).Exec("DELETE FROM trip_updates WHERE created_at < ?", utcMicro(time.Now().Add(-tripUpdatesKeep))).Error
		}
	}
}
