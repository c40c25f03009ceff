// Package store keeps Ride API's state in PostgreSQL or SQLite through GORM.
//
// It owns the models, one set of versioned migrations per engine, the queries, and the mapping
// of engine errors to its own sentinels (see errors.go). Callers never see a driver error type.
//
// Times are written in UTC at microsecond precision: PostgreSQL stores microseconds, and SQLite
// stores times as text whose order equals time order only when every value has the same offset.
// Models normalise their own times before they are written; code that writes times around
// them (column updates here, the storetest helpers) must pass UTC, microsecond-truncated values
// itself.
//
// Method names read one way: a lookup is the noun and its key (TripByID, EventsBySubject,
// PaymentsForTrip), a list is ListNouns, and everything else starts with its verb
// (CreateTrip, SetTripStatus, ClaimNearestDriver, RevokeAPIKey).
package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strings"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/rideapi/ride/store/internal/handle"
)

// Engine names the database engine behind a Store, for the few places where SQL differs.
type Engine string

const (
	// EnginePostgres is PostgreSQL, reached with a postgres:// or postgresql:// URL.
	EnginePostgres Engine = "postgres"
	// EngineSQLite is an SQLite file, the zero-configuration default.
	EngineSQLite Engine = "sqlite"
)

// DefaultSQLitePath is the file Open uses when it is given an empty URL, so that the server
// runs out of the box without any database to set up.
const DefaultSQLitePath = "ride.db"

// sqliteBusyTimeout is how long an SQLite connection waits for another process's write lock
// before it gives up: long enough for any demo-sized write, short enough to surface a stuck lock.
const sqliteBusyTimeout = 10 * time.Second

//go:embed migrations/postgres/*.sql migrations/sqlite/*.sql
var migrations embed.FS

// Store is the application's handle on the database. Its methods are safe for concurrent use.
// A Store handed to a WithTx callback runs every query inside that transaction.
type Store struct {
	// db is a new-statement session (gorm.Open's, or Session with NewDB, not a chained or
	// WithContext one): conn takes a statement of its own from it for every query, which a
	// chained DB would share instead.
	db     *gorm.DB
	engine Engine
	// sqlDB is the connection pool; nil for a transaction-scoped Store, which owns nothing.
	sqlDB *sql.DB
	// txConn is the connection a transaction-scoped Store's transaction holds, on PostgreSQL:
	// its hot single-row reads run on it through pgx (readRow). nil for every other Store.
	txConn *sql.Conn
	// sql holds the hot statements in this engine's placeholder syntax, built once.
	sql *prebuiltSQL
	// reads coalesces concurrent reads of single trips; nil for a transaction-scoped Store.
	reads *tripReads
	// async is a small PostgreSQL pool whose commits do not wait for the WAL flush (see
	// openAsyncCommitPool): it writes drivers' positions (RecordDriverPosition) and the log
	// of webhook delivery attempts (RecordAttempt). Nil on SQLite and for a
	// transaction-scoped Store.
	async *sql.DB
	// listeners holds the PostgreSQL connection that waits for notifications (notify: every
	// channel on one connection), apart from the pool it would otherwise hold for good. Nil on
	// SQLite and for a transaction-scoped Store.
	listeners *sql.DB
	notify    *notifications
	// probe holds the one connection Ping uses, apart from the pool: a pool busy with slow
	// requests (or SQLite's one connection, held by a long write) is not a database that
	// stopped answering. Nil for a transaction-scoped Store.
	probe *sql.DB
	// turns admits statements to the pool, and asyncTurns to async (see admission); nil for
	// a transaction-scoped Store.
	turns, asyncTurns *admission
	// direct connects straight to the primary for migrations, when the pool goes through
	// PgBouncer (WithDirectURL); nil otherwise.
	direct *pgx.ConnConfig
	// standbys serve reads (WithStandbys); nil without them and for a transaction-scoped
	// Store.
	standbys *standbys
}

// The GORM handle goes to storetest alone, which sets up and inspects rows the API offers no
// way to; the product reads and writes through the store's methods only.
func init() {
	handle.DB = func(st any) *gorm.DB { return st.(*Store).db }
	handle.OnDirect = func(st any, fn func(ctx context.Context, sql string, vars []any)) {
		p := st.(*Store).sql
		p.direct = append(p.direct, fn)
	}
}

// Open connects to the database named by url and checks that it answers.
//
// An empty url means the SQLite file DefaultSQLitePath; "sqlite://PATH" names another SQLite
// file; "postgres://…" and "postgresql://…" are PostgreSQL connection URLs. Open does not
// migrate: call Migrate.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	o := options{readTimeout: DefaultReadTimeout, pool: DefaultPool}
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.pool.check(); err != nil {
		return nil, err
	}
	engine, dialector, pgConfig, liteDSN, err := dialectorFor(url, o)
	if err != nil {
		return nil, err
	}
	// What needs a session of its own connects straight to the primary.
	direct := pgConfig
	switch {
	case engine != EnginePostgres && (o.pgbouncer || o.directURL != "" || len(o.standbyURLs) > 0):
		return nil, errors.New("store: PgBouncer, a direct URL and standbys are PostgreSQL's")
	case o.directURL != "":
		if direct, err = pgConnConfig(o.directURL, options{readTimeout: o.readTimeout}); err != nil {
			return nil, fmt.Errorf("store: direct URL: %w", err)
		}
	case o.pgbouncer:
		return nil, errors.New("store: through PgBouncer, listening for notifications and migrating need a direct URL to the primary")
	}
	db, err := gorm.Open(dialector, &gorm.Config{
		// Duplicate keys and foreign-key violations come back as GORM sentinels, which
		// interpretError maps to the store's own.
		TranslateError: true,
		Logger:         logger.Discard,
		NowFunc:        now,
		// Every write the store makes is either a single statement or runs inside WithTx, so
		// GORM's implicit per-statement transaction only adds round trips.
		SkipDefaultTransaction: true,
		// GORM's own ping ignores ctx; Open pings below with it instead, so an unreachable
		// server fails within the caller's deadline.
		DisableAutomaticPing: true,
	})
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", engine, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", engine, err)
	}
	switch engine {
	case EngineSQLite:
		// SQLite allows one writer at a time. One connection serialises every statement in
		// this process, so writers queue in database/sql instead of failing with SQLITE_BUSY;
		// busy_timeout covers other processes on the same file. A transaction holds the
		// connection, so code inside WithTx must use the transaction's Store, never the outer one.
		sqlDB.SetMaxOpenConns(1)
		sqlDB.SetMaxIdleConns(1)
		sqlDB.SetConnMaxLifetime(0)
		sqlDB.SetConnMaxIdleTime(0)
	case EnginePostgres:
		// Under load a connection closed for being one too many idle is opened again a
		// moment later, and each is a new server process: keep as many idle as configured.
		pooled := o.pool.MaxConns - sideConns
		sqlDB.SetMaxOpenConns(pooled)
		sqlDB.SetMaxIdleConns(min(o.pool.MaxIdleConns, pooled))
		sqlDB.SetConnMaxIdleTime(5 * time.Minute)
		sqlDB.SetConnMaxLifetime(time.Hour)
	}
	s := &Store{db: db, engine: engine, sqlDB: sqlDB, sql: prebuild(db)}
	s.turns = newAdmission(sqlDB.Stats().MaxOpenConnections)
	if err := s.turns.register(db); err != nil {
		_ = sqlDB.Close()
		return nil, err
	}
	if err := registerRowQuery(db); err != nil {
		_ = sqlDB.Close()
		return nil, err
	}
	if pgConfig != nil {
		s.async = openAsyncCommitPool(pgConfig, asyncConns)
		s.asyncTurns = newAdmission(asyncConns)
		// One connection listens on every channel for everyone following them, held while
		// anyone listens and closed when nobody does: the listenConns of the budget.
		s.listeners = stdlib.OpenDB(*direct)
		s.listeners.SetMaxIdleConns(0)
		s.notify = &notifications{s: s, followers: map[*follower]struct{}{}}
		s.probe = stdlib.OpenDB(*pgConfig)
	} else if s.probe, err = sql.Open(sqlite.DriverName, liteDSN); err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("store: open %s: %w", engine, err)
	}
	s.probe.SetMaxOpenConns(1)
	s.probe.SetMaxIdleConns(1)
	s.reads = &tripReads{s: s}
	if o.directURL != "" {
		s.direct = direct
	}
	if len(o.standbyURLs) > 0 {
		if s.standbys, err = openStandbys(s, o.standbyURLs, o); err != nil {
			_ = s.Close()
			return nil, err
		}
		if err := s.standbys.register(db); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	if err := s.Ping(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("store: open %s: %w", engine, err)
	}
	return s, nil
}

// dialectorFor picks the engine and GORM dialector for a database URL, and the connection
// settings: for PostgreSQL pgx's, for SQLite the data source name.
func dialectorFor(raw string, o options) (Engine, gorm.Dialector, *pgx.ConnConfig, string, error) {
	switch {
	case raw == "":
		dsn := sqliteDSN(DefaultSQLitePath)
		return EngineSQLite, sqlite.Open(dsn), nil, dsn, nil
	case strings.HasPrefix(raw, "sqlite://"):
		path := strings.TrimPrefix(raw, "sqlite://")
		if path == "" {
			return "", nil, nil, "", errors.New("store: sqlite:// URL without a file path")
		}
		dsn := sqliteDSN(path)
		return EngineSQLite, sqlite.Open(dsn), nil, dsn, nil
	case strings.HasPrefix(raw, "postgres://"), strings.HasPrefix(raw, "postgresql://"):
		cfg, err := pgConnConfig(raw, o)
		if err != nil {
			return "", nil, nil, "", err
		}
		return EnginePostgres, postgres.New(postgres.Config{Conn: stdlib.OpenDB(*cfg)}), cfg, "", nil
	default:
		scheme, _, _ := strings.Cut(raw, "://")
		return "", nil, nil, "", fmt.Errorf("store: unsupported database URL scheme %q (want sqlite:// or postgres://)", scheme)
	}
}

// sqliteDSN adds the connection settings every SQLite connection needs to a file path (and to
// any query parameters the caller already gave).
//
//   - WAL lets readers in other processes proceed while one connection writes.
//   - busy_timeout waits for another process's lock instead of failing at once.
//   - foreign_keys is off by default in SQLite.
//   - analysis_limit bounds the rows PRAGMA optimize reads of each index (see optimize).
//   - _txlock=immediate takes the write lock at BEGIN, so a transaction never has to upgrade
//     a read lock later, which SQLite refuses with SQLITE_BUSY whatever the timeout.
func sqliteDSN(path string) string {
	file, query, _ := strings.Cut(path, "?")
	params := []string{
		fmt.Sprintf("_pragma=busy_timeout(%d)", sqliteBusyTimeout.Milliseconds()),
		"_pragma=journal_mode(WAL)",
		"_pragma=foreign_keys(1)",
		"_pragma=analysis_limit(1000)",
		"_txlock=immediate",
	}
	if query != "" {
		params = append([]string{query}, params...)
	}
	return file + "?" + strings.Join(params, "&")
}

// now is GORM's clock for automatic created_at and updated_at values: UTC at microsecond
// precision, the resolution both engines keep.
func now() time.Time {
	return time.Now().UTC().Truncate(time.Microsecond)
}

// Migrate applies every migration not yet applied; running it again is a no-op.
//
// Each call uses its own goose Provider (no goose global state), so several stores in one
// process can migrate at once. On PostgreSQL a session advisory lock keeps concurrent server
// replicas from applying the same migration twice.
func (s *Store) Migrate(ctx context.Context) error {
	return s.migrateUpTo(ctx, math.MaxInt64)
}

// sqliteMigrateAttempts bounds the runs of the migrations on SQLite, where a run can fail
// because another one is applying the same migrations at the same time.
const sqliteMigrateAttempts = 8

// migrateUpTo applies the migrations up to and including version.
func (s *Store) migrateUpTo(ctx context.Context, version int64) error {
	if s.sqlDB == nil {
		return errors.New("store: Migrate inside a transaction")
	}
	var (
		dialect goose.Dialect
		dir     string
		opts    = []goose.ProviderOption{goose.WithDisableGlobalRegistry(true)}
	)
	switch s.engine {
	case EnginePostgres:
		dialect, dir = goose.DialectPostgres, "migrations/postgres"
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return fmt.Errorf("store: migrate: %w", err)
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	case EngineSQLite:
		dialect, dir = goose.DialectSQLite3, "migrations/sqlite"
	default:
		return fmt.Errorf("store: migrate: unknown engine %q", s.engine)
	}
	fsys, err := fs.Sub(migrations, dir)
	if err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	// A Provider is cheap and holds per-run state; provider.Close would close s.sqlDB, which
	// the Store still owns, so it is never called.
	db := s.sqlDB
	if s.direct != nil {
		// Its advisory lock is a session's: through PgBouncer another client's transaction
		// could take the same server connection, and the lock with it.
		db = stdlib.OpenDB(*s.direct)
		defer db.Close()
	}
	up := func() error {
		provider, err := goose.NewProvider(dialect, db, fsys, opts...)
		if err != nil {
			return err
		}
		_, err = provider.UpTo(ctx, version)
		return err
	}
	err = up()
	for attempt := 1; err != nil && s.engine == EngineSQLite && attempt < sqliteMigrateAttempts && ctx.Err() == nil; attempt++ {
		// SQLite has no advisory lock: another process may have applied the same migration
		// between this one's check and its CREATE TABLE, and may still be applying the next
		// ones. Each run sees the work done meanwhile and goes on from there; a genuinely
		// broken migration fails every time.
		time.Sleep(time.Duration(attempt) * 20 * time.Millisecond)
		err = up()
	}
	if err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	return s.optimize(ctx)
}

// optimize brings SQLite's statistics for its query planner up to date where they are missing
// or stale (PRAGMA optimize; each table's look bounded by analysis_limit, set in sqliteDSN).
// Without them SQLite guesses, and reads a driver's trips through the account's index, walking
// the account's trips until it finds theirs: a hundred times slower on a file of 100,000 trips.
// PostgreSQL's autovacuum keeps its own.
func (s *Store) optimize(ctx context.Context) error {
	if s.engine != EngineSQLite {
		return nil
	}
	if err := s.conn(ctx).Exec("PRAGMA optimize = 0x10002").Error; err != nil {
		return fmt.Errorf("store: optimize: %w", err)
	}
	return nil
}

// Ping reports whether the database answers, for readiness checks and outage probes. It
// asks on a connection of its own, so a pool whose connections are all busy does not make a
// database that answers look unreachable.
func (s *Store) Ping(ctx context.Context) error {
	if s.probe == nil {
		return s.db.WithContext(ctx).Exec("SELECT 1").Error
	}
	return s.probe.PingContext(ctx)
}

// Close releases the connection pool. Closing a transaction-scoped Store does nothing: the
// transaction ends when its WithTx callback returns.
func (s *Store) Close() error {
	if s.sqlDB == nil {
		return nil
	}
	if s.standbys != nil {
		s.standbys.close()
	}
	for _, pool := range []*sql.DB{s.async, s.listeners, s.probe} {
		if pool != nil {
			_ = pool.Close()
		}
	}
	return s.sqlDB.Close()
}

// openAsyncCommitPool opens a pool of size connections for writes that commit without waiting
// for the WAL flush (each statement turns synchronous_commit off for its own transaction:
// recordPositionAsyncSQL), writes that a crash of the database may lose without harm, because
// what they record is either replaced moments later or found out otherwise:
//   - a driver's position is worth keeping only until the next report, seconds later;
//   - a delivery attempt's outcome, when lost, leaves the delivery claimed: once the lease runs
//     out it is sent again as the next attempt and the lost one is logged as such, which is
//     what happens after a crash of the worker anyway. Claims themselves stay durable, so no
//     attempt number is ever sent twice.
//
// Such a crash can lose the last fraction of a second of these writes and nothing else: every
// other write goes through the main pool, durable, except idempotency claims, which commit
// the same way on it (claimIdempotencyKeyAsyncSQL says why that loses nothing).
func openAsyncCommitPool(cfg *pgx.ConnConfig, size int) *sql.DB {
	db := stdlib.OpenDB(*cfg.Copy())
	db.SetMaxOpenConns(size)
	db.SetMaxIdleConns(size)
	db.SetConnMaxIdleTime(5 * time.Minute)
	return db
}

// Engine reports which database engine the Store talks to.
func (s *Store) Engine() Engine {
	return s.engine
}

// Pool is the connection pool, for its statistics (the go_sql_* metrics); nil for a
// transaction-scoped Store.
func (s *Store) Pool() *sql.DB { return s.sqlDB }
