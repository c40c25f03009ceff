package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"
)

// Beyond one database server (server/README.md draws the topology):
//
//   - PgBouncer in transaction pooling between the replicas and the primary: each transaction
//     may run on another server connection, so nothing may outlive one. Statements are sent
//     unprepared (ThroughPgBouncer), the async commits say so in the statement, and what needs
//     a session of its own (the connection that listens for notifications, the migrations'
//     advisory lock) connects straight to the primary (WithDirectURL).
//   - Streaming standbys serve reads (WithStandbys): the reads of a request that writes
//     nothing (ReadingAs), outside any transaction, go to a standby that has replayed far
//     enough for its caller. Writes and transactions stay on the primary.
//   - Read your writes: after a write, the primary's WAL position is recorded for the caller's
//     key on the primary (read_positions); a caller's read goes to a standby only once that
//     standby has replayed past it, whichever replica of the service wrote and whichever reads.
//   - A standby that lags past the bound, stops answering or refuses is skipped, and the read
//     is served by the primary: it costs speed, never an error.

// ThroughPgBouncer tells Open that its url leads to PgBouncer in transaction pooling (and so do
// the standbys' urls): statements are sent with their parameters and no prepared statement
// (pgx's exec mode), since a statement prepared on one server connection would be run on
// another. Open then needs WithDirectURL.
func ThroughPgBouncer() Option {
	return func(o *options) { o.pgbouncer = true }
}

// WithDirectURL names a connection straight to the primary, for what needs a session of its
// own: the connection that listens for notifications, and migrations (their advisory lock).
// Without it they use the url given to Open.
func WithDirectURL(url string) Option {
	return func(o *options) { o.directURL = url }
}

// WithStandbys names PostgreSQL streaming standbys of the primary that serve reads, and the
// lag past which a standby is skipped (DefaultStandbyMaxLag when zero).
func WithStandbys(urls []string, maxLag time.Duration) Option {
	return func(o *options) { o.standbyURLs, o.standbyMaxLag = urls, maxLag }
}

// WithLogger gives the store a logger for what changes of its own accord: a standby skipped
// or used again. Without one it says nothing.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.log = l }
}

// DefaultStandbyMaxLag is how far a standby may lag behind the primary and still serve reads.
const DefaultStandbyMaxLag = 10 * time.Second

const (
	// standbyPoll is how often the primary's WAL position and each standby's replay are read.
	standbyPoll = 100 * time.Millisecond
	// standbyTimeout bounds a statement on a standby: one that hangs costs a read this long,
	// then the primary serves it, and the poll has taken the standby out meanwhile.
	standbyTimeout = time.Second
	// lagSamples is how many of the primary's positions the lag is measured against: a
	// standby further behind than these cover is past any bound.
	lagSamples = 1200
)

// Standbys tells whether s reads from standbys.
func (s *Store) Standbys() bool { return s.standbys != nil }

// A reader is the caller a context's reads are made for (ReadingAs).
type reader struct {
	key string
	// readOnly tells whether its request writes nothing, so that its reads may go to a
	// standby.
	readOnly bool

	mu sync.Mutex
	// seen is the WAL position the caller's reads must see: of its last write, looked up on
	// the first read (looked), or of a write made during the request.
	seen   lsn
	looked bool
}

type readerKey struct{}

// ReadingAs makes the returned context read and write for the caller with API key id key.
// readOnly says that the request writes nothing, so that its reads may be served by a standby
// that has replayed the caller's last write; the writes made with it record their position
// for the caller's next reads, wherever they are served.
func ReadingAs(ctx context.Context, key string, readOnly bool) context.Context {
	return context.WithValue(ctx, readerKey{}, &reader{key: key, readOnly: readOnly})
}

func readerOf(ctx context.Context) *reader {
	r, _ := ctx.Value(readerKey{}).(*reader)
	return r
}

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

// standby is one streaming standby and what the store knows of it.
type standby struct {
	name string // host:port, for the log
	db   *sql.DB
	gorm *gorm.DB // reads routed to it, falling back to the primary (standbyPool)
	// replayed is the WAL position it had replayed when last asked: a lower bound of where
	// it is now, so a read that it covers sees every write up to there.
	replayed atomic.Uint64
	// usable tells whether it answered its last poll and lagged within the bound.
	usable atomic.Bool
	// down tells whether it stopped answering, a poll or a read found, and no poll has
	// found it answering since: each change is logged once.
	down atomic.Bool
	// lagging tells whether its last poll found it past the lag bound.
	lagging bool
}

// standbys routes reads to the standbys and keeps watch over them.
type standbys struct {
	s       *Store // the primary's
	list    []*standby
	maxLag  time.Duration
	log     *slog.Logger
	next    atomic.Uint32 // round robin over the usable standbys
	stop    context.CancelFunc
	stopped chan struct{}

	// samples are the primary's recent WAL positions, oldest first, against which a
	// standby's replay becomes a lag in time.
	samples []lagSample
}

type lagSample struct {
	at  time.Time
	pos lsn
}

// openStandbys connects to the standbys of urls, configured as the primary's cfg is.
func openStandbys(s *Store, urls []string, o options) (*standbys, error) {
	maxLag := o.standbyMaxLag
	if maxLag <= 0 {
		maxLag = DefaultStandbyMaxLag
	}
	log := o.log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sb := &standbys{s: s, maxLag: maxLag, log: log, stopped: make(chan struct{})}
	// A standby's connections wait for an answer no longer than a statement there may take,
	// whatever waits: database/sql pings a connection idle for a second before reusing it, a
	// ping no statement's bound covers, and a standby that hangs would hold it for the
	// primary's whole read timeout.
	so := o
	if so.readTimeout == 0 || so.readTimeout > standbyTimeout {
		so.readTimeout = standbyTimeout
	}
	for _, raw := range urls {
		cfg, err := pgConnConfig(raw, so)
		if err != nil {
			sb.close()
			return nil, fmt.Errorf("standby: %w", err)
		}
		db := stdlib.OpenDB(*cfg)
		// As many connections as the pool has turns, and one for the poll, which takes none:
		// a read never waits inside database/sql for one, where its bound would not hold.
		db.SetMaxOpenConns(o.pool.PoolSize() + 1)
		db.SetMaxIdleConns(min(o.pool.MaxIdleConns, o.pool.PoolSize()))
		db.SetConnMaxIdleTime(5 * time.Minute)
		db.SetConnMaxLifetime(time.Hour)
		one := &standby{name: hostOf(raw), db: db}
		// A session of its own: a Session without a context shares the primary's statement.
		one.gorm = s.db.Session(&gorm.Session{NewDB: true, Context: context.Background()})
		one.gorm.Statement.ConnPool = &standbyPool{standby: one, sbs: sb, primary: s.sqlDB}
		sb.list = append(sb.list, one)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sb.stop = cancel
	sb.poll(ctx) // the first look before Open returns: reads may use the standbys at once
	go sb.watch(ctx)
	return sb, nil
}

func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Host
	}
	return "standby"
}

func (sb *standbys) close() {
	if sb.stop != nil {
		sb.stop()
		<-sb.stopped
	}
	for _, one := range sb.list {
		_ = one.db.Close()
	}
}

// watch polls the primary and the standbys every standbyPoll until ctx ends, and now and then
// forgets the positions of writes every usable standby has replayed.
func (sb *standbys) watch(ctx context.Context) {
	defer close(sb.stopped)
	tick := time.NewTicker(standbyPoll)
	defer tick.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			sb.poll(ctx)
		}
		if n%purgeReadPositionsEvery == 0 {
			sb.purge(ctx)
		}
	}
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

// poll reads the primary's WAL position and each standby's replay position, and decides which
// standbys serve reads.
func (sb *standbys) poll(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, standbyTimeout)
	defer cancel()
	var text string
	if err := sb.s.probe.QueryRowContext(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&text); err == nil {
		if pos, err := parseLSN(text); err == nil {
			sb.samples = append(sb.samples, lagSample{at: time.Now(), pos: pos})
			if len(sb.samples) > lagSamples {
				sb.samples = sb.samples[len(sb.samples)-lagSamples:]
			}
		}
	}
	for _, one := range sb.list {
		var replayed sql.NullString
		err := one.db.QueryRowContext(ctx, "SELECT pg_last_wal_replay_lsn()::text").Scan(&replayed)
		var pos lsn
		if err == nil {
			if !replayed.Valid {
				err = errors.New("not a standby: pg_last_wal_replay_lsn() is null")
			} else {
				pos, err = parseLSN(replayed.String)
			}
		}
		if err != nil {
			sb.markDown(one, err)
			continue
		}
		one.replayed.Store(uint64(pos))
		if one.down.CompareAndSwap(true, false) {
			sb.log.Info("standby answers again", "standby", one.name)
		}
		lag := sb.lag(pos)
		switch over := lag > sb.maxLag; {
		case over && !one.lagging:
			one.lagging = true
			sb.log.Warn("standby lags past its bound; reading from the primary", "standby", one.name,
				"lag", lag.Round(time.Millisecond).String(), "bound", sb.maxLag.String())
		case !over && one.lagging:
			one.lagging = false
			sb.log.Info("standby caught up; serving reads again", "standby", one.name)
		}
		one.usable.Store(!one.lagging)
	}
}

// markDown takes a standby that stopped answering out until a poll finds it answering, from
// the poll or from a read that found it so.
func (sb *standbys) markDown(one *standby, err error) {
	one.usable.Store(false)
	if one.down.CompareAndSwap(false, true) {
		sb.log.Warn("standby unavailable; reading from the primary", "standby", one.name, "error", err.Error())
	}
}

// lag is how long ago the primary was where a standby that replayed pos is: zero when pos is
// at or past the primary's latest known position.
func (sb *standbys) lag(pos lsn) time.Duration {
	n := len(sb.samples)
	if n == 0 || pos >= sb.samples[n-1].pos {
		return 0
	}
	// The newest sample the standby has not reached: the primary passed pos before it.
	for i := n - 1; i >= 0; i-- {
		if sb.samples[i].pos <= pos {
			return time.Since(sb.samples[i+1].at)
		}
	}
	return time.Since(sb.samples[0].at) + standbyPoll // further behind than the samples go
}

// route is the database ctx's reads go to: a usable standby that has replayed what the
// caller must see, or nil for the primary.
func (sb *standbys) route(ctx context.Context) *gorm.DB {
	if db, ok := routedTo(ctx); ok {
		return db
	}
	r := readerOf(ctx)
	if r == nil || !r.readOnly || InTx(ctx) {
		return nil
	}
	seen, ok := sb.seen(ctx, r)
	if !ok {
		return nil
	}
	n := uint32(len(sb.list))
	start := sb.next.Add(1)
	for i := range n {
		one := sb.list[(start+i)%n]
		if one.usable.Load() && lsn(one.replayed.Load()) >= seen {
			return one.gorm
		}
	}
	return nil
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

// FromPrimary makes the reads done with the returned context go to the primary: a stream told
// of a change by a notification reads it there, where it is already.
func FromPrimary(ctx context.Context) context.Context {
	return routed(ctx, nil)
}

type routeKey struct{}

// routed makes the reads done with ctx go to db, a standby's (route), or to the primary when
// db is nil: a statement shared by several callers' reads goes where all of them may read.
func routed(ctx context.Context, db *gorm.DB) context.Context {
	return context.WithValue(ctx, routeKey{}, &db)
}

// routedTo is the route ctx was given (routed): ok false when none.
func routedTo(ctx context.Context) (db *gorm.DB, ok bool) {
	to, _ := ctx.Value(routeKey{}).(**gorm.DB)
	if to == nil {
		return nil, false
	}
	return *to, true
}

// standbyPool runs reads on a standby and anything else on the primary; a read the standby
// cannot serve (it stopped answering, refuses a write, or cancelled the statement for a
// conflict with recovery) is served by the primary, unseen by the caller.
type standbyPool struct {
	standby *standby
	sbs     *standbys
	primary *sql.DB
}

func (p *standbyPool) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return p.primary.PrepareContext(ctx, query)
}

func (p *standbyPool) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return p.primary.ExecContext(ctx, query, args...)
}

func (p *standbyPool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	rows, err := p.standby.db.QueryContext(p.bounded(ctx), query, args...)
	if err == nil || !p.elsewhere(err) {
		return rows, err
	}
	return p.primary.QueryContext(ctx, query, args...)
}

func (p *standbyPool) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	row := p.standby.db.QueryRowContext(p.bounded(ctx), query, args...)
	if err := row.Err(); err != nil && p.elsewhere(err) {
		return p.primary.QueryRowContext(ctx, query, args...)
	}
	return row
}

// bounded bounds a statement on the standby by standbyTimeout, within ctx's own bound.
func (p *standbyPool) bounded(ctx context.Context) context.Context {
	at := time.Now().Add(standbyTimeout)
	if d, ok := Deadline(ctx); ok && d.Before(at) {
		return ctx
	}
	return WithDeadline(ctx, at)
}

// elsewhere tells whether the primary should serve a statement the standby failed with err,
// and takes a standby that stopped answering out until its next good poll.
func (p *standbyPool) elsewhere(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "25006", "40001": // a write on a standby; a conflict with recovery
			return true
		}
	}
	if Unavailable(err) {
		p.sbs.markDown(p.standby, err)
		return true
	}
	return false
}

// pgConnConfig parses a PostgreSQL URL into pgx's settings as Open uses them: a connect
// timeout, reads bounded (boundReads), statements unprepared through PgBouncer.
func pgConnConfig(raw string, o options) (*pgx.ConnConfig, error) {
	if _, err := url.Parse(raw); err != nil {
		// url.Error quotes the URL, password included: report only the kind of problem.
		return nil, errors.New("store: malformed PostgreSQL URL")
	}
	if !strings.Contains(raw, "connect_timeout=") {
		// A server that does not answer must not hold a request for the TCP timeout.
		sep := "?"
		if strings.Contains(raw, "?") {
			sep = "&"
		}
		raw += sep + "connect_timeout=5"
	}
	cfg, err := pgx.ParseConfig(raw)
	if err != nil {
		return nil, errors.New("store: malformed PostgreSQL URL") // its text may quote the password
	}
	if o.pgbouncer {
		cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	boundReads(cfg, o.readTimeout)
	return cfg, nil
}
