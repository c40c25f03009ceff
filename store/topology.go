package store

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
