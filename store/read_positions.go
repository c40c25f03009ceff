package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"
)

// lsn is a WAL position (PostgreSQL's pg_lsn) as a number.
type lsn uint64

// parseLSN reads a pg_lsn's text, "16/B374D848".
func parseLSN(s string) (lsn, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("store: not a WAL position: %q", s)
	}
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("store: not a WAL position: %q", s)
	}
	return lsn(h<<32 | l), nil
}

// purgeReadPositionsEvery is how many polls apart read positions are purged (a minute).
const purgeReadPositionsEvery = 600

// purge deletes the read positions older than the lag bound and a minute: a standby within the
// bound has replayed those writes, so they decide nothing.
func (sb *standbys) purge(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, standbyTimeout)
	defer cancel()
	_, _ = sb.s.probe.ExecContext(ctx, `DELETE FROM read_positions WHERE updated_at < $1`,
		time.Now().Add(-sb.maxLag-time.Minute))
}

// seen is the WAL position r's reads must see, looked up on the primary on its first read;
// false when it could not be known (the read then goes to the primary).
func (sb *standbys) seen(ctx context.Context, r *reader) (lsn, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.looked {
		return r.seen, true
	}
	if err := sb.s.turns.enter(ctx); err != nil {
		return 0, false
	}
	var text string
	err := sb.s.sqlDB.QueryRowContext(ctx, `SELECT lsn::text FROM read_positions WHERE key_id = $1`, r.key).Scan(&text)
	sb.s.turns.leave()
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return 0, false
	default:
		pos, err := parseLSN(text)
		if err != nil {
			return 0, false
		}
		r.seen = max(r.seen, pos)
	}
	r.looked = true
	return r.seen, true
}

// wrote records that ctx's caller has written: the primary's WAL position now, past the write's
// commit, becomes what its reads must see, here and on every replica of the service.
func (sb *standbys) wrote(ctx context.Context) {
	sb.record(ctx, recordReadPositionSQL)
}

// wroteAsync is wrote after a commit that did not wait for the WAL flush (a position report):
// its commit record may still sit in the WAL buffers, past the position written out, so the
// position recorded is the insert position, which lies past it.
func (sb *standbys) wroteAsync(ctx context.Context) {
	sb.record(ctx, recordAsyncReadPositionSQL)
}

func (sb *standbys) record(ctx context.Context, query string) {
	r := readerOf(ctx)
	if r == nil || r.key == "" || InTx(ctx) {
		return
	}
	var text string
	err := sb.s.turns.enter(ctx)
	if err == nil {
		err = sb.s.sqlDB.QueryRowContext(ctx, query, r.key).Scan(&text)
		sb.s.turns.leave()
	}
	pos, perr := parseLSN(text)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil || perr != nil {
		// Unknown: the rest of the request reads from the primary. The caller's next
		// request may read from a standby that has not replayed this write yet; its
		// position is recorded with its next write.
		r.readOnly = false
		return
	}
	r.seen = max(r.seen, pos)
}

// created gives a key just created its creator's view: its first reads see at least what the
// primary had written when it was made (the key's own row, and what its creator wrote for it).
func (sb *standbys) created(ctx context.Context, keyID string) {
	if InTx(ctx) {
		return // its row is not committed yet: no position covers it
	}
	if err := sb.s.turns.enter(ctx); err == nil {
		_ = sb.s.sqlDB.QueryRowContext(ctx, recordReadPositionSQL, keyID).Scan(new(string))
		sb.s.turns.leave()
	}
}

// register makes every write db runs outside a transaction record its position for the
// caller (WithTx records those of a transaction once it commits).
func (sb *standbys) register(db *gorm.DB) error {
	cb := db.Callback()
	type hook = func(name string, fn func(*gorm.DB)) error
	for _, h := range []struct {
		name  string
		after hook
	}{
		{"gorm:create", cb.Create().After("gorm:create").Register},
		{"gorm:update", cb.Update().After("gorm:update").Register},
		{"gorm:delete", cb.Delete().After("gorm:delete").Register},
		{"gorm:raw", cb.Raw().After("gorm:raw").Register},
	} {
		if err := h.after("ride:read_position", sb.afterWrite); err != nil {
			return fmt.Errorf("store: hook %s: %w", h.name, err)
		}
	}
	return nil
}

func (sb *standbys) afterWrite(db *gorm.DB) {
	if db.Error == nil && fromPool(db) && db.RowsAffected > 0 {
		sb.wrote(db.Statement.Context)
	}
}

// recordReadPositionSQL records a caller's write position: how far the primary has written its
// WAL, past the commit of a synchronous write. (Not the insert position, which may lie ahead of
// anything written out: a standby could wait long for it.) Asynchronous commit suffices: the row
// is visible to every reader at once, and a crash that lost it lost the recent writes with it.
var recordReadPositionSQL = recordReadPositionWith("pg_current_wal_lsn()")

// recordAsyncReadPositionSQL records the position of an asynchronous commit (wroteAsync).
var recordAsyncReadPositionSQL = recordReadPositionWith("pg_current_wal_insert_lsn()")

func recordReadPositionWith(position string) string {
	return `WITH async AS (SELECT set_config('synchronous_commit', 'off', true))
INSERT INTO read_positions (key_id, lsn, updated_at)
SELECT $1, ` + position + `, now() FROM async
ON CONFLICT (key_id) DO UPDATE SET lsn = greatest(read_positions.lsn, excluded.lsn), updated_at = excluded.updated_at
RETURNING lsn::text`
}
