package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/rideapi/ride/webhooks"
)

// Store is the database of the webhook delivery worker.
var (
	_ webhooks.Store         = (*Store)(nil)
	_ webhooks.EventListener = (*Store)(nil)
)

// Delivery statuses, as stored.
const (
	deliveryPending   = "pending"
	deliverySucceeded = "succeeded"
	deliveryFailed    = "failed"
)

// webhookDelivery is a row of webhook_deliveries: one event owed to one endpoint.
type webhookDelivery struct {
	ID         int64 `gorm:"column:id;primaryKey;autoIncrement"`
	EventID    string
	EndpointID string
	Status     string
	Attempts   int
	DueAt      time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

func (webhookDelivery) TableName() string { return "webhook_deliveries" }

// RecordAttempt logs one attempt and moves its delivery on (see webhooks.Store).
func (s *Store) RecordAttempt(ctx context.Context, a webhooks.Attempt) error {
	row := WebhookAttempt{
		ID: a.ID, DeliveryID: a.DeliveryID, EndpointID: a.EndpointID, EventID: a.EventID,
		EventType: a.EventType, Attempt: a.Number, Status: string(a.Outcome), AttemptedAt: a.AttemptedAt,
	}
	if a.ResponseStatus != 0 {
		row.ResponseStatus = &a.ResponseStatus
	}
	latency := a.Latency.Milliseconds()
	row.LatencyMs = &latency
	if a.Error != "" {
		row.Error = &a.Error
	}
	// due is when the next attempt is due; nil when none follows.
	var due *time.Time
	if a.Outcome == webhooks.Pending {
		next := floorMicro(a.NextAttemptAt)
		due = &next
	}
	row.NextAttemptAt = due
	now := floorMicro(a.AttemptedAt.Add(a.Latency))

	var err error
	if s.attempts != nil && !a.DisableEndpoint {
		// The common case, in one statement (one round trip) whose commit does not wait for
		// the disk: see openAsyncCommitPool.
		_, err = s.attempts.ExecContext(ctx, pgRecordAttempt.numbered, deliveryStatus(a.Outcome), now, due, a.DeliveryID, a.Number,
			row.ID, row.DeliveryID, row.EndpointID, row.EventID, row.EventType, row.Attempt, row.Status,
			row.ResponseStatus, row.LatencyMs, row.Error, floorMicro(row.AttemptedAt), due)
		err = interpretError(err)
	} else {
		err = s.WithTx(ctx, func(tx *Store) error {
			if err := tx.conn(ctx).Exec(moveDelivery, deliveryStatus(a.Outcome), now, due, a.DeliveryID, a.Number).Error; err != nil {
				return err
			}
			if a.DisableEndpoint {
				err := tx.conn(ctx).Model(&WebhookEndpoint{}).Where("id = ?", a.EndpointID).
					Updates(map[string]any{"status": WebhookDisabled, "updated_at": now}).Error
				if err != nil {
					return err
				}
				// Nothing more goes to a disabled endpoint.
				err = tx.conn(ctx).Model(&webhookDelivery{}).
					Where("endpoint_id = ? AND status = ?", a.EndpointID, deliveryPending).
					Updates(map[string]any{"status": deliveryFailed, "updated_at": now}).Error
				if err != nil {
					return err
				}
			}
			return tx.conn(ctx).Create(&row).Error
		})
	}
	if errors.Is(err, ErrInvalidReference) {
		return nil // the endpoint, and with it the delivery, was deleted meanwhile
	}
	return err
}

// moveDelivery moves a delivery on after an attempt, only if this attempt still holds it:
// after a lease ran out, another worker may have claimed the next attempt, whose result wins.
// A nil due time keeps the delivery's.
const moveDelivery = `UPDATE webhook_deliveries SET status = ?, updated_at = ?, due_at = coalesce(?, due_at)
	WHERE id = ? AND attempts = ? AND status = 'pending'`

// pgRecordAttempt is moveDelivery and the attempt's log entry in one statement. A second entry
// for the same attempt fails it whole.
var pgRecordAttempt = placeholders(`WITH moved AS (` + moveDelivery + `)
INSERT INTO webhook_attempts (id, delivery_id, endpoint_id, event_id, event_type, attempt, status,
	response_status, latency_ms, error, attempted_at, next_attempt_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)

// attemptsPoolSize bounds the connections that record attempts: one short statement each.
const attemptsPoolSize = 4

func deliveryStatus(o webhooks.Outcome) string {
	switch o {
	case webhooks.Succeeded:
		return deliverySucceeded
	case webhooks.Failed:
		return deliveryFailed
	}
	return deliveryPending
}

// purgeBatch bounds one DELETE of PurgeEvents, so that a large backlog is removed in short
// transactions instead of one long lock.
const purgeBatch = 1000

// PurgeEvents deletes the events created before createdBefore, with their deliveries and
// attempts (ON DELETE CASCADE), in batches.
func (s *Store) PurgeEvents(ctx context.Context, createdBefore time.Time) (int64, error) {
	before := floorMicro(createdBefore)
	var total int64
	for {
		res := s.conn(ctx).Exec(`DELETE FROM events WHERE seq IN (
			SELECT seq FROM events WHERE created_at < ? LIMIT ?)`, before, purgeBatch)
		if res.Error != nil {
			return total, interpretError(res.Error)
		}
		total += res.RowsAffected
		if res.RowsAffected < purgeBatch {
			return total, nil
		}
	}
}

// eventsChannel is the PostgreSQL notification channel of new events (migration 00007).
const eventsChannel = "ride_events"

// ListenEvents calls notify whenever a transaction that appended events commits, on
// PostgreSQL, until ctx ends. It holds one connection of the pool while it listens and
// reconnects after a failure. On SQLite it returns nil at once: the worker's poll is all there is.
func (s *Store) ListenEvents(ctx context.Context, notify func()) error {
	if s.engine != EnginePostgres || s.sqlDB == nil {
		return nil
	}
	// A failure to listen is not worth a log line: the worker polls anyway. A lost
	// connection may have hidden notifications: wake once, then listen again.
	s.listen(ctx, eventsChannel, func(string) { notify() }, notify)
	return nil
}

// listenRetryWait is how long listen waits before listening again after a lost connection.
const listenRetryWait = time.Second

// listen listens on channel until ctx ends, calling notify with each notification's payload;
// after a lost connection it calls lost (notifications may have been missed meanwhile) and
// listens again after listenRetryWait.
func (s *Store) listen(ctx context.Context, channel string, notify func(payload string), lost func()) {
	for ctx.Err() == nil {
		_ = s.listenOnce(ctx, channel, notify)
		if ctx.Err() != nil {
			return
		}
		lost()
		select {
		case <-ctx.Done():
		case <-time.After(listenRetryWait):
		}
	}
}

// listenOnce holds one connection of the pool listening on channel, calling notify with each
// notification's payload, until ctx ends or the connection fails.
func (s *Store) listenOnce(ctx context.Context, channel string, notify func(payload string)) error {
	conn, err := s.sqlDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(driverConn any) error {
		c, ok := driverConn.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("store: listen: unexpected driver connection %T", driverConn)
		}
		pg := c.Conn()
		waitWithoutBound(pg.PgConn().Conn()) // it waits for notifications on purpose
		err := func() error {
			if _, err := pg.Exec(ctx, "LISTEN "+channel); err != nil {
				return err
			}
			for {
				n, err := pg.WaitForNotification(ctx)
				if err != nil {
					return err
				}
				notify(n.Payload)
			}
		}()
		// The connection listens (or was interrupted mid-wait): database/sql discards a
		// connection whose Raw call fails with ErrBadConn instead of pooling it again.
		return fmt.Errorf("store: listen: %w (%w)", err, driver.ErrBadConn)
	})
}

// Redeliver makes the delivery of an event to an endpoint due at now again, or creates it when
// the event never went there: the next attempt follows the ones logged so far. The event and
// the endpoint must be the account's (ErrNotFound otherwise); a disabled endpoint is
// ErrConflict. On PostgreSQL the delivery workers are woken at commit.
func (s *Store) Redeliver(ctx context.Context, account, endpointID, eventID string, now time.Time) error {
	now = utcMicro(now)
	return s.WithTx(ctx, func(tx *Store) error {
		endpoint, err := tx.WebhookEndpointByID(ctx, account, endpointID)
		if err != nil {
			return err
		}
		if endpoint.Status != WebhookEnabled {
			return ErrConflict
		}
		if _, err := tx.EventByID(ctx, account, eventID); err != nil {
			return err
		}
		err = tx.conn(ctx).Exec(`INSERT INTO webhook_deliveries (event_id, endpoint_id, status, attempts, due_at, created_at, updated_at)
VALUES (?, ?, ?, 0, ?, ?, ?)
ON CONFLICT (event_id, endpoint_id) DO UPDATE SET status = excluded.status, due_at = excluded.due_at, updated_at = excluded.updated_at`,
			eventID, endpointID, deliveryPending, now, now, now).Error
		if err != nil {
			return interpretError(err)
		}
		if tx.engine == EnginePostgres {
			return interpretError(tx.conn(ctx).Exec("SELECT pg_notify(?, '')", eventsChannel).Error)
		}
		return nil
	})
}
