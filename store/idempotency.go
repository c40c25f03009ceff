package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// States of an idempotency record.
const (
	// IdempotencyPending means an attempt holds the key: its request is running, or it crashed
	// and the key is free again once the lease (LockedAt) has run out.
	IdempotencyPending = "pending"
	// IdempotencyCompleted means the answer is stored and every later request replays it.
	IdempotencyCompleted = "completed"
	// IdempotencyFailed means the last attempt ended in a 5xx and committed nothing; the next
	// request with the same key and fingerprint runs afresh.
	IdempotencyFailed = "failed"
)

// IdempotencyRecord is what the server remembers about one Idempotency-Key of one account:
// which request it was first used for (Fingerprint), who holds it, and once completed, the
// answer to replay.
type IdempotencyRecord struct {
	Account     string `gorm:"column:account;primaryKey"`
	Key         string `gorm:"column:idem_key;primaryKey"`
	Fingerprint string
	Method      string
	Path        string
	Status      string
	// Owner is the random token of the attempt that holds (or last held) the key.
	Owner    string
	LockedAt time.Time
	// The stored answer, set when Status is completed. ResponseHeaders is a JSON object of
	// header names to value lists.
	ResponseStatus  *int
	ResponseHeaders *string
	ResponseBody    []byte
	CreatedAt       time.Time
	CompletedAt     *time.Time
}

// TableName pins the table name so that GORM's naming rules can never move it.
func (IdempotencyRecord) TableName() string { return "idempotency_records" }

// BeforeSave keeps stored times in UTC at microsecond precision.
func (r *IdempotencyRecord) BeforeSave(*gorm.DB) error {
	r.normalize()
	return nil
}

// AfterFind returns times in UTC whatever the driver's location.
func (r *IdempotencyRecord) AfterFind(*gorm.DB) error {
	r.normalize()
	return nil
}

func (r *IdempotencyRecord) normalize() {
	normalizeTime(&r.LockedAt)
	normalizeTime(&r.CreatedAt)
	normalizeTimePtr(&r.CompletedAt)
}

// IdempotencyClaim asks for a key on behalf of one attempt.
type IdempotencyClaim struct {
	Account, Key, Fingerprint, Method, Path string
	// Owner is the attempt's random token; CompleteIdempotencyRecord and
	// FailIdempotencyRecord must present it.
	Owner string
	Now   time.Time
	// StaleBefore is the lease boundary: a pending record locked before it belongs to an
	// attempt presumed dead, and may be taken over.
	StaleBefore time.Time
}

// claimIdempotencyKeySQL inserts a new key's pending record and leaves an existing one alone.
// It and completeIdempotencyRecordSQL are written out instead of built by GORM from the model:
// every POST with a key runs both, and GORM's building them (reflection over the model, its
// hooks) was a good part of their CPU.
const claimIdempotencyKeySQL = `INSERT INTO idempotency_records
    (account, idem_key, fingerprint, method, path, status, owner, locked_at, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (account, idem_key) DO NOTHING`

// claimIdempotencyKeyAsyncSQL is claimIdempotencyKeySQL committing without waiting for the WAL
// flush (set_config in the statement itself, as recordPositionAsyncSQL), on PostgreSQL: a
// claim on its own records nothing a crash of the database can make wrong. Every answer given
// under the key (the outcome, or a 409 to a concurrent request) depends on the claim only once
// a later commit has flushed the WAL, which takes the claim's, written before, with it; a
// crash before then loses the claim with everything the request did, no answer given depended
// on it, and a retry claims the key afresh. Concurrent requests on the primary see the claim
// at once, as visibility does not wait for the flush; standbys receive it only after the
// flush, so the claim's reads go to the primary. Every keyed POST waits for one WAL flush,
// its own commit's, instead of two.
const claimIdempotencyKeyAsyncSQL = `WITH async AS (SELECT set_config('synchronous_commit', 'off', true))
INSERT INTO idempotency_records
    (account, idem_key, fingerprint, method, path, status, owner, locked_at, created_at)
SELECT ?, ?, ?, ?, ?, ?, ?, ?, ? FROM async ON CONFLICT (account, idem_key) DO NOTHING`

// idempotencyClaimRetries bounds the claim loop: a round only repeats when the record
// vanished (purged) between two statements, which cannot happen twice in a row in practice.
const idempotencyClaimRetries = 3

// ClaimIdempotencyKey tries to make c.Owner the holder of the key, in statements of their own
// (call it outside any transaction, so the pending marker is visible to concurrent requests at
// once). It returns claimed true when the caller now holds the key: the key was new, or its
// record has c's fingerprint and is failed or pending past its lease. Otherwise it returns the
// record as it stands, for the caller to replay it, refuse a fingerprint mismatch, or report it
// in flight.
//
// Each statement is a single conditional write, never read-check-write: on PostgreSQL two
// claimers of a new key serialise on the primary key (one inserts, the other's
// ON CONFLICT DO NOTHING changes nothing), and a take-over is `UPDATE … WHERE status …`.
func (s *Store) ClaimIdempotencyKey(ctx context.Context, c IdempotencyClaim) (IdempotencyRecord, bool, error) {
	if c.Account == "" || c.Key == "" || c.Owner == "" {
		return IdempotencyRecord{}, false, errors.New("store: an idempotency claim needs an account, a key and an owner")
	}
	for range idempotencyClaimRetries {
		rec := IdempotencyRecord{
			Account: c.Account, Key: c.Key, Fingerprint: c.Fingerprint, Method: c.Method, Path: c.Path,
			Status: IdempotencyPending, Owner: c.Owner, LockedAt: utcMicro(c.Now), CreatedAt: utcMicro(c.Now),
		}
		claim := claimIdempotencyKeySQL
		if s.engine == EnginePostgres {
			claim = claimIdempotencyKeyAsyncSQL
		}
		res := s.execSQL(ctx, claim, rec.Account, rec.Key, rec.Fingerprint, rec.Method,
			rec.Path, rec.Status, rec.Owner, rec.LockedAt, rec.CreatedAt)
		if res.err != nil {
			return IdempotencyRecord{}, false, interpretError(res.err)
		}
		if res.rows == 1 {
			return rec, true, nil
		}

		// The key exists: take it over if its last attempt failed or died. The lease (and the
		// retention, which counts from the last attempt) restarts now; created_at keeps the
		// first use.
		now := c.Now.UTC().Truncate(time.Microsecond)
		took := s.conn(ctx).Model(&IdempotencyRecord{}).
			Where("account = ? AND idem_key = ? AND fingerprint = ?", c.Account, c.Key, c.Fingerprint).
			Where("status = ? OR (status = ? AND locked_at < ?)",
				IdempotencyFailed, IdempotencyPending, c.StaleBefore.UTC().Truncate(time.Microsecond)).
			Updates(map[string]any{"status": IdempotencyPending, "owner": c.Owner, "locked_at": now})
		if took.Error != nil {
			return IdempotencyRecord{}, false, interpretError(took.Error)
		}
		taken := took.RowsAffected == 1

		// On the primary: a standby may not have the record yet (a claim commits without
		// waiting for the WAL flush, which is what standbys receive), and then the key would
		// seem to vanish at every round.
		existing, err := s.IdempotencyRecordByKey(FromPrimary(ctx), c.Account, c.Key)
		if errors.Is(err, ErrNotFound) {
			continue // purged in between: claim afresh
		}
		if err != nil {
			return IdempotencyRecord{}, false, err
		}
		return existing, taken && existing.Owner == c.Owner, nil
	}
	return IdempotencyRecord{}, false, fmt.Errorf("store: idempotency key %q kept vanishing while claimed", c.Key)
}

// IdempotencyRecordByKey returns the record of an account's key, or ErrNotFound.
func (s *Store) IdempotencyRecordByKey(ctx context.Context, account, key string) (IdempotencyRecord, error) {
	var r IdempotencyRecord
	if err := s.conn(ctx).Where("account = ? AND idem_key = ?", account, key).Take(&r).Error; err != nil {
		return IdempotencyRecord{}, interpretError(err)
	}
	return r, nil
}

// IdempotencyResult is the answer stored for a key.
type IdempotencyResult struct {
	Account, Key, Owner string
	Status              int
	// Headers is a JSON object of header names to value lists.
	Headers string
	Body    []byte
	Now     time.Time
}

// CompleteIdempotencyRecord stores the answer and marks the record completed, if r.Owner
// still holds it. Call it on the transaction that made the request's effect, so the answer
// commits with the effect or not at all. ErrConflict when the owner lost the key (its lease
// ran out and another attempt took over): the caller must roll the effect back.
func (s *Store) CompleteIdempotencyRecord(ctx context.Context, r IdempotencyResult) error {
	body := r.Body
	if body == nil {
		body = []byte{} // stored answers always have a body, possibly empty
	}
	res := s.execSQL(ctx, completeIdempotencyRecordSQL, IdempotencyCompleted, r.Status, r.Headers, body,
		utcMicro(r.Now), r.Account, r.Key, r.Owner, IdempotencyPending)
	return changedRows(res, ErrConflict)
}

const completeIdempotencyRecordSQL = `UPDATE idempotency_records
SET status = ?, response_status = ?, response_headers = ?, response_body = ?, completed_at = ?
WHERE account = ? AND idem_key = ? AND owner = ? AND status = ?`

// FailIdempotencyRecord marks the record failed if owner still holds it, so the key may be
// retried at once. Not holding it any more is no error: whoever took over decides.
func (s *Store) FailIdempotencyRecord(ctx context.Context, account, key, owner string) error {
	err := s.conn(ctx).Model(&IdempotencyRecord{}).
		Where("account = ? AND idem_key = ? AND owner = ? AND status = ?", account, key, owner, IdempotencyPending).
		Update("status", IdempotencyFailed).Error
	return interpretError(err)
}

// idempotencyPurgeBatch bounds one DELETE of the purge, so a large backlog never holds locks
// (or SQLite's only connection) for long.
const idempotencyPurgeBatch = 1000

// PurgeIdempotencyRecords deletes the records whose last attempt started before cutoff (for
// most records, their first and only use), in batches, and returns how many went. Their keys
// are new again afterwards. A record whose key was taken over later is kept longer, so an
// attempt in flight never loses its record.
func (s *Store) PurgeIdempotencyRecords(ctx context.Context, cutoff time.Time) (int64, error) {
	cutoff = ceilMicro(cutoff)
	var total int64
	for {
		// Row values in IN work on both engines; the subquery bounds the batch.
		res := s.conn(ctx).Exec(`DELETE FROM idempotency_records WHERE (account, idem_key) IN (
			SELECT account, idem_key FROM idempotency_records WHERE locked_at < ? LIMIT ?)`,
			cutoff, idempotencyPurgeBatch)
		if res.Error != nil {
			return total, interpretError(res.Error)
		}
		total += res.RowsAffected
		if res.RowsAffected < idempotencyPurgeBatch {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}
