package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm/clause"

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

// fanOutEvent is what the fan-out needs of an event: which it is, its kind and its time, and
// (on PostgreSQL) its writing transaction for the cursor.
type fanOutEvent struct {
	Seq       int64
	ID        string
	Account   string
	Type      string
	CreatedAt time.Time
	Txid      string
}

// FanOutEvents creates the deliveries of up to p.Limit events after the fan-out cursor and
// moves the cursor past them, in one transaction: a crash before the commit leaves the events
// to the next pass; UNIQUE(event_id, endpoint_id) keeps a delivery from ever being made twice.
//
// The cursor's order is seq on SQLite, where events commit in seq order, and (txid, seq) on
// PostgreSQL limited to transactions older than every running one: see migration 00007.
// Replicas take turns: on PostgreSQL a pass that finds the cursor row locked by another
// replica's pass does nothing (SKIP LOCKED); on SQLite the write lock serialises them.
func (s *Store) FanOutEvents(ctx context.Context, p webhooks.FanOutParams) (int, error) {
	if p.Limit < 1 {
		return 0, fmt.Errorf("%w: limit %d", ErrInvalidListParams, p.Limit)
	}
	// A read first, outside any transaction: most passes find nothing new, and then cost
	// neither a write lock nor a transaction id.
	var pending bool
	if err := s.conn(ctx).Raw(s.fanOutPendingSQL()).Scan(&pending).Error; err != nil {
		return 0, interpretError(err)
	}
	if !pending {
		return 0, nil
	}
	now := floorMicro(p.Now)
	var handled int
	err := s.WithTx(ctx, func(tx *Store) error {
		events, err := tx.nextFanOutEvents(ctx, p.Limit)
		if err != nil || len(events) == 0 {
			return err
		}
		var endpoints []WebhookEndpoint
		if err := tx.conn(ctx).Where("status = ?", WebhookEnabled).Find(&endpoints).Error; err != nil {
			return err
		}
		var rows []webhookDelivery
		for _, e := range events {
			for _, w := range endpoints {
				// An endpoint receives its own account's events created after its registration.
				if w.Account != e.Account || w.CreatedAt.After(e.CreatedAt) || !subscribes(w, e.Type) {
					continue
				}
				rows = append(rows, webhookDelivery{
					EventID: e.ID, EndpointID: w.ID, Status: deliveryPending,
					DueAt: now, CreatedAt: now, UpdatedAt: now,
				})
			}
		}
		if len(rows) > 0 {
			err := tx.conn(ctx).Clauses(clause.OnConflict{DoNothing: true}).CreateInBatches(rows, 500).Error
			if err != nil {
				return err
			}
		}
		last := events[len(events)-1]
		if s.engine == EnginePostgres {
			err = tx.conn(ctx).Exec("UPDATE webhook_fanout SET last_txid = ?::xid8, last_seq = ? WHERE id = 1", last.Txid, last.Seq).Error
		} else {
			err = tx.conn(ctx).Exec("UPDATE webhook_fanout SET last_seq = ? WHERE id = 1", last.Seq).Error
		}
		handled = len(events)
		return err
	})
	return handled, err
}

func subscribes(w WebhookEndpoint, eventType string) bool {
	for _, t := range w.EventTypes {
		if t == eventType {
			return true
		}
	}
	return false
}

// The PostgreSQL fan-out reads only events of transactions older than the oldest one still
// running: those have all ended, so every such event is visible now or never will be.
const (
	pgFanOutPending = `SELECT EXISTS (
	SELECT 1 FROM events e, webhook_fanout f
	WHERE f.id = 1 AND (e.txid, e.seq) > (f.last_txid, f.last_seq)
	  AND e.txid < pg_snapshot_xmin(pg_current_snapshot()))`
	pgFanOutNext = `SELECT e.seq, e.id, e.account, e.type, e.created_at, e.txid::text AS txid
	FROM events e, webhook_fanout f
	WHERE f.id = 1 AND (e.txid, e.seq) > (f.last_txid, f.last_seq)
	  AND e.txid < pg_snapshot_xmin(pg_current_snapshot())
	ORDER BY e.txid, e.seq
	LIMIT ?`
	sqliteFanOutPending = `SELECT EXISTS (
	SELECT 1 FROM events WHERE seq > (SELECT last_seq FROM webhook_fanout WHERE id = 1))`
	sqliteFanOutNext = `SELECT seq, id, account, type, created_at, '' AS txid FROM events
	WHERE seq > (SELECT last_seq FROM webhook_fanout WHERE id = 1)
	ORDER BY seq
	LIMIT ?`
)

func (s *Store) fanOutPendingSQL() string {
	if s.engine == EnginePostgres {
		return pgFanOutPending
	}
	return sqliteFanOutPending
}

// nextFanOutEvents locks the cursor (PostgreSQL: or finds another pass holding it and returns
// nothing) and reads the events after it.
func (s *Store) nextFanOutEvents(ctx context.Context, limit int) ([]fanOutEvent, error) {
	query := sqliteFanOutNext
	if s.engine == EnginePostgres {
		var locked []int
		err := s.conn(ctx).Raw("SELECT id FROM webhook_fanout WHERE id = 1 FOR UPDATE SKIP LOCKED").Scan(&locked).Error
		if err != nil || len(locked) == 0 {
			return nil, err
		}
		query = pgFanOutNext
	}
	var events []fanOutEvent
	if err := s.conn(ctx).Raw(query, limit).Scan(&events).Error; err != nil {
		return nil, err
	}
	for i := range events {
		normalizeTime(&events[i].CreatedAt)
	}
	return events, nil
}

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
	if a.Outcome == webhooks.Pending {
		next := a.NextAttemptAt
		row.NextAttemptAt = &next
	}
	now := floorMicro(a.AttemptedAt.Add(a.Latency))

	err := s.WithTx(ctx, func(tx *Store) error {
		// The delivery moves on only if this attempt still holds it: after a lease ran out,
		// another worker may have claimed the next attempt, whose result wins.
		update := map[string]any{"status": deliveryStatus(a.Outcome), "updated_at": now}
		if a.Outcome == webhooks.Pending {
			update["due_at"] = floorMicro(a.NextAttemptAt)
		}
		err := tx.conn(ctx).Model(&webhookDelivery{}).
			Where("id = ? AND attempts = ? AND status = ?", a.DeliveryID, a.Number, deliveryPending).
			Updates(update).Error
		if err != nil {
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
	if errors.Is(err, ErrInvalidReference) {
		return nil // the endpoint, and with it the delivery, was deleted meanwhile
	}
	return err
}

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
