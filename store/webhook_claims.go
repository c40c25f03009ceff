package store

import (
	"context"
	"time"

	"github.com/rideapi/ride/webhooks"
	"github.com/rideapi/ride/webhooks/delivery"
)

// claimedDelivery is a claimed delivery joined with its event and endpoint.
type claimedDelivery struct {
	ID       int64
	Attempts int
	// PreviousClaim is when the delivery last changed before this claim: the claim of the
	// attempt before, when that one was never recorded.
	PreviousClaim           *time.Time
	EventID                 string
	EventType               string
	EventCreatedAt          time.Time
	EventData               string
	EndpointID              string
	URL                     string
	Secret                  string
	PreviousSecret          *string
	PreviousSecretExpiresAt *time.Time
}

// heldUntilEnabled is the due time of a delivery held for a disabled endpoint: never due until
// the endpoint is enabled again, which makes it due at once.
var heldUntilEnabled = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

const (
	// pgClaim locks the earliest due deliveries that no other claim holds (SKIP LOCKED:
	// concurrent claims take disjoint rows instead of waiting), in the order of the partial
	// index on due pending deliveries, which a claim walks only as far as its limit however
	// long the backlog. Of those, it holds the ones whose endpoint is disabled, and numbers the
	// next attempt of the others and leases them, in one statement.
	//
	// A disabled endpoint's row is locked (FOR SHARE) while its deliveries are held, which
	// orders the hold with an enabling PATCH: a PATCH that commits first is seen (the lock
	// waits for it and reads the row again, now enabled), and one that comes later waits for
	// this claim, so that its release of held deliveries finds these. Enabled endpoints, the
	// common case, are not locked.
	pgClaim = `WITH locked AS (
	SELECT d.id, d.endpoint_id, d.updated_at AS previous_claim FROM webhook_deliveries d
	WHERE d.status = 'pending' AND d.due_at <= ?
	ORDER BY d.due_at, d.id
	LIMIT ?
	FOR UPDATE SKIP LOCKED
), disabled AS (
	SELECT w.id FROM webhook_endpoints w
	WHERE w.id IN (SELECT endpoint_id FROM locked) AND w.status <> 'enabled'
	FOR SHARE
), targets AS (
	SELECT l.id, l.previous_claim, l.endpoint_id NOT IN (SELECT id FROM disabled) AS enabled
	FROM locked l JOIN webhook_endpoints w ON w.id = l.endpoint_id
), held AS (
	UPDATE webhook_deliveries d SET due_at = ? FROM targets t WHERE d.id = t.id AND NOT t.enabled
), claimed AS (
	UPDATE webhook_deliveries d SET attempts = d.attempts + 1, due_at = ?, updated_at = ?
	FROM targets t WHERE d.id = t.id AND t.enabled
	RETURNING d.id, d.attempts, d.event_id, d.endpoint_id
)
SELECT c.id, c.attempts, e.id AS event_id, e.type AS event_type, e.created_at AS event_created_at,
	e.data::text AS event_data, w.id AS endpoint_id, w.url, w.secret, w.previous_secret,
	w.previous_secret_expires_at, t.previous_claim
FROM claimed c
JOIN targets t ON t.id = c.id
JOIN events e ON e.id = c.event_id
JOIN webhook_endpoints w ON w.id = c.endpoint_id
ORDER BY c.id`
	// sqliteDue, sqliteHold and sqliteClaim do the same; the write lock of the enclosing
	// transaction makes them atomic.
	sqliteDue = `SELECT d.id, d.updated_at, w.status = 'enabled' AS enabled FROM webhook_deliveries d
	JOIN webhook_endpoints w ON w.id = d.endpoint_id
	WHERE d.status = 'pending' AND d.due_at <= ?
	ORDER BY d.due_at, d.id
	LIMIT ?`
	sqliteHold    = `UPDATE webhook_deliveries SET due_at = ? WHERE id IN ?`
	sqliteClaim   = `UPDATE webhook_deliveries SET attempts = attempts + 1, due_at = ?, updated_at = ? WHERE id IN ?`
	sqliteClaimed = `SELECT d.id, d.attempts, e.id AS event_id, e.type AS event_type,
	e.created_at AS event_created_at, e.data AS event_data, w.id AS endpoint_id, w.url, w.secret,
	w.previous_secret, w.previous_secret_expires_at
FROM webhook_deliveries d
JOIN events e ON e.id = d.event_id
JOIN webhook_endpoints w ON w.id = d.endpoint_id
WHERE d.id IN ?
ORDER BY d.id`
)

// ClaimDeliveries claims due deliveries for one worker (see delivery.Store).
func (s *Store) ClaimDeliveries(ctx context.Context, p delivery.ClaimParams) ([]delivery.Delivery, error) {
	if p.Limit < 1 {
		return nil, nil
	}
	now, lease := floorMicro(p.Now), floorMicro(p.LeaseUntil)
	var rows []claimedDelivery
	if s.engine == EnginePostgres {
		if err := s.conn(ctx).Raw(pgClaim, now, p.Limit, heldUntilEnabled, lease, now).Scan(&rows).Error; err != nil {
			return nil, interpretError(err)
		}
	} else {
		// SQLite: look before taking the write lock, which most polls would take for nothing.
		var due bool
		err := s.conn(ctx).Raw(`SELECT EXISTS (SELECT 1 FROM webhook_deliveries
			WHERE status = 'pending' AND due_at <= ?)`, now).Scan(&due).Error
		if err != nil || !due {
			return nil, interpretError(err)
		}
		err = s.WithTx(ctx, func(tx *Store) error {
			var due []struct {
				ID        int64
				UpdatedAt time.Time
				Enabled   bool
			}
			if err := tx.conn(ctx).Raw(sqliteDue, now, p.Limit).Scan(&due).Error; err != nil {
				return err
			}
			var ids, held []int64
			previous := make(map[int64]time.Time, len(due))
			for _, d := range due {
				if !d.Enabled {
					held = append(held, d.ID)
					continue
				}
				ids, previous[d.ID] = append(ids, d.ID), d.UpdatedAt
			}
			if len(held) > 0 {
				if err := tx.conn(ctx).Exec(sqliteHold, heldUntilEnabled, held).Error; err != nil {
					return err
				}
			}
			if len(ids) == 0 {
				return nil
			}
			if err := tx.conn(ctx).Exec(sqliteClaim, lease, now, ids).Error; err != nil {
				return err
			}
			if err := tx.conn(ctx).Raw(sqliteClaimed, ids).Scan(&rows).Error; err != nil {
				return err
			}
			for i := range rows {
				claim := previous[rows[i].ID]
				rows[i].PreviousClaim = &claim
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if err := s.logLostAttempts(ctx, rows, now, p.NewAttemptID); err != nil {
		return nil, err
	}
	out := make([]delivery.Delivery, len(rows))
	for i, r := range rows {
		normalizeTime(&r.EventCreatedAt)
		d := delivery.Delivery{
			ID: r.ID, Attempt: r.Attempts, EndpointID: r.EndpointID, URL: r.URL, Secret: r.Secret,
			Event: webhooks.Event{ID: r.EventID, Type: r.EventType, CreatedAt: r.EventCreatedAt, Data: []byte(r.EventData)},
		}
		if r.PreviousSecret != nil && r.PreviousSecretExpiresAt != nil {
			d.PreviousSecret, d.PreviousSecretExpiresAt = *r.PreviousSecret, r.PreviousSecretExpiresAt.UTC()
		}
		out[i] = d
	}
	return out, nil
}

// lostAttemptError is the log's word for an attempt whose worker stopped (killed, or its host
// lost) between claiming and recording it: it may or may not have reached the receiver.
const lostAttemptError = "lost: the worker that made this attempt stopped before recording it; taken over when its lease ran out"

// logLostAttempts writes, for each delivery just claimed as attempt n > 1, the log entry of
// attempt n-1 when none exists: that attempt was claimed and its worker died. It was made at
// its claim (the delivery's previous change) and noticed now.
func (s *Store) logLostAttempts(ctx context.Context, rows []claimedDelivery, now time.Time, newID func() string) error {
	if newID == nil {
		return nil
	}
	for _, r := range rows {
		if r.Attempts < 2 || r.PreviousClaim == nil {
			continue
		}
		claimed := floorMicro(r.PreviousClaim.UTC())
		latency := now.Sub(claimed).Milliseconds()
		err := s.conn(ctx).Exec(`INSERT INTO webhook_attempts
	(id, delivery_id, endpoint_id, event_id, event_type, attempt, status, latency_ms, error, attempted_at, next_attempt_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (delivery_id, attempt) DO NOTHING`,
			newID(), r.ID, r.EndpointID, r.EventID, r.EventType, r.Attempts-1, deliveryPending, max(latency, 0),
			lostAttemptError, claimed, now).Error
		if err != nil {
			return interpretError(err)
		}
	}
	return nil
}
