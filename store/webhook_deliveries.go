package store

import (
	"context"
	"errors"
	"time"

	"github.com/rideapi/ride/webhooks/delivery"
)

// Store is the database of the webhook delivery worker.
var (
	_ delivery.Store         = (*Store)(nil)
	_ delivery.EventListener = (*Store)(nil)
	_ delivery.BatchRecorder = (*Store)(nil)
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

// attemptRecord is an attempt as stored: its log entry, and how its delivery moves on.
type attemptRecord struct {
	row WebhookAttempt
	// status is the delivery's status after the attempt, as of movedAt.
	status  string
	movedAt time.Time
	// due is when the next attempt is due; nil when none follows.
	due *time.Time
}

func newAttemptRecord(a delivery.Attempt) attemptRecord {
	r := attemptRecord{
		row: WebhookAttempt{
			ID: a.ID, DeliveryID: a.DeliveryID, EndpointID: a.EndpointID, EventID: a.EventID,
			EventType: a.EventType, Attempt: a.Number, Status: string(a.Outcome),
			AttemptedAt: floorMicro(a.AttemptedAt),
		},
		status:  deliveryStatus(a.Outcome),
		movedAt: floorMicro(a.AttemptedAt.Add(a.Latency)),
	}
	if a.ResponseStatus != 0 {
		r.row.ResponseStatus = &a.ResponseStatus
	}
	latency := a.Latency.Milliseconds()
	r.row.LatencyMs = &latency
	if a.Error != "" {
		r.row.Error = &a.Error
	}
	if a.Outcome == delivery.Pending {
		next := floorMicro(a.NextAttemptAt)
		r.due = &next
	}
	r.row.NextAttemptAt = r.due
	return r
}

// RecordAttempt logs one attempt and moves its delivery on (see delivery.Store).
func (s *Store) RecordAttempt(ctx context.Context, a delivery.Attempt) error {
	err := s.RecordAttempts(ctx, []delivery.Attempt{a})
	if errors.Is(err, ErrInvalidReference) {
		return nil // the endpoint, and with it the delivery, was deleted meanwhile
	}
	return err
}

// RecordAttempts records attempts as RecordAttempt does each, all or none, in one round trip
// on PostgreSQL (see delivery.BatchRecorder). A deleted delivery fails the batch.
func (s *Store) RecordAttempts(ctx context.Context, attempts []delivery.Attempt) error {
	records := make([]attemptRecord, len(attempts))
	disables := false
	for i, a := range attempts {
		records[i] = newAttemptRecord(a)
		disables = disables || a.DisableEndpoint
	}
	if s.async != nil && !disables {
		return s.recordOnPool(ctx, records)
	}
	return s.WithTx(ctx, func(tx *Store) error {
		for i, r := range records {
			if err := tx.recordInTx(ctx, r, attempts[i].DisableEndpoint); err != nil {
				return err
			}
		}
		return nil
	})
}

// recordOnPool records attempts in one statement on the attempts pool, whose commits do not
// wait for the disk (see openAsyncCommitPool).
func (s *Store) recordOnPool(ctx context.Context, records []attemptRecord) error {
	// One array per column, for unnest.
	var (
		ids, endpoints, events, types, statuses, moves []string
		errs                                           []*string
		deliveries                                     []int64
		latencies                                      []*int64
		numbers                                        []int32
		responses                                      []*int32
		attempted, movedAt                             []time.Time
		held                                           []string // the status each delivery must have
		due                                            []*time.Time
	)
	for _, r := range records {
		var response *int32
		if r.row.ResponseStatus != nil {
			status := int32(*r.row.ResponseStatus)
			response = &status
		}
		ids, deliveries, endpoints = append(ids, r.row.ID), append(deliveries, r.row.DeliveryID), append(endpoints, r.row.EndpointID)
		events, types, numbers = append(events, r.row.EventID), append(types, r.row.EventType), append(numbers, int32(r.row.Attempt))
		statuses, responses, latencies = append(statuses, r.row.Status), append(responses, response), append(latencies, r.row.LatencyMs)
		errs, attempted, due = append(errs, r.row.Error), append(attempted, r.row.AttemptedAt), append(due, r.due)
		moves, movedAt, held = append(moves, r.status), append(movedAt, r.movedAt), append(held, deliveryPending)
	}
	if err := s.asyncTurns.enter(ctx); err != nil {
		return interpretError(err)
	}
	defer s.asyncTurns.leave()
	_, err := s.async.ExecContext(ctx, pgRecordAttempts, ids, deliveries, endpoints, events, types, numbers,
		statuses, responses, latencies, errs, attempted, due, moves, movedAt, held)
	return interpretError(err)
}

// recordInTx records one attempt inside a transaction; with disable it also disables the
// endpoint and fails its other pending deliveries.
func (s *Store) recordInTx(ctx context.Context, r attemptRecord, disable bool) error {
	err := s.conn(ctx).Exec(`UPDATE webhook_deliveries SET status = ?, updated_at = ?, due_at = coalesce(?, due_at)
	WHERE id = ? AND attempts = ? AND status = 'pending'`, r.status, r.movedAt, r.due, r.row.DeliveryID, r.row.Attempt).Error
	if err != nil {
		return interpretError(err)
	}
	if disable {
		err := s.conn(ctx).Model(&WebhookEndpoint{}).Where("id = ?", r.row.EndpointID).
			Updates(map[string]any{"status": WebhookDisabled, "updated_at": r.movedAt}).Error
		if err != nil {
			return interpretError(err)
		}
		// Nothing more goes to a disabled endpoint.
		err = s.conn(ctx).Model(&webhookDelivery{}).
			Where("endpoint_id = ? AND status = ?", r.row.EndpointID, deliveryPending).
			Updates(map[string]any{"status": deliveryFailed, "updated_at": r.movedAt}).Error
		if err != nil {
			return interpretError(err)
		}
	}
	return interpretError(s.conn(ctx).Create(&r.row).Error)
}

// pgRecordAttempts moves each delivery on, only if its attempt still holds it (after a lease
// ran out, another worker may have claimed the next attempt, whose result wins; a nil due time
// keeps the delivery's), and writes the attempts' log entries, in one statement: an entry
// already logged for the same attempt fails it whole. The deliveries are looked up by key
// (= ANY), not by joining the input, which the planner would do by scanning them all; and the
// status they must still have (pending) comes with the input, so that the planner never walks
// the partial index of pending deliveries instead, as a literal 'pending' would let it.
const pgRecordAttempts = `WITH input AS (
	SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::int[],
		$7::text[], $8::int[], $9::bigint[], $10::text[], $11::timestamptz[], $12::timestamptz[],
		$13::text[], $14::timestamptz[], $15::text[])
	AS i(id, delivery_id, endpoint_id, event_id, event_type, attempt, status, response_status,
		latency_ms, error, attempted_at, next_attempt_at, delivery_status, moved_at, held_status)
), moved AS (
	UPDATE webhook_deliveries d SET status = i.delivery_status, updated_at = i.moved_at,
		due_at = coalesce(i.next_attempt_at, d.due_at)
	FROM input i
	WHERE d.id = ANY($2::bigint[]) AND d.id = i.delivery_id AND d.attempts = i.attempt
		AND d.status = i.held_status
), async AS (
	SELECT set_config('synchronous_commit', 'off', true) -- see recordPositionAsyncSQL
)
INSERT INTO webhook_attempts (id, delivery_id, endpoint_id, event_id, event_type, attempt, status,
	response_status, latency_ms, error, attempted_at, next_attempt_at)
SELECT id, delivery_id, endpoint_id, event_id, event_type, attempt, status, response_status,
	latency_ms, error, attempted_at, next_attempt_at
FROM input, async`

func deliveryStatus(o delivery.Outcome) string {
	switch o {
	case delivery.Succeeded:
		return deliverySucceeded
	case delivery.Failed:
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

// eventsChannel is the PostgreSQL notification channel of new deliveries: the fan-out of an
// event notifies it when it made one (migration 00015), and Redeliver does.
const eventsChannel = "ride_events"

// ListenEvents calls notify whenever a transaction that made deliveries due commits (events
// that fanned out to an endpoint, a redelivery), on PostgreSQL, until ctx ends. It holds one connection of the pool while it listens and
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
