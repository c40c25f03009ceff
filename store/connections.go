package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DefaultReadTimeout bounds how long a PostgreSQL connection waits for the server's next bytes
// once it has sent a statement: no statement of the service comes near it, and a server that
// stopped answering (a stalled network, a frozen host) then costs a request this long, not
// the TCP timeout.
const DefaultReadTimeout = 5 * time.Second

// Option changes how Open connects.
type Option func(*options)

type options struct {
	readTimeout time.Duration
	pool        Pool
	// The topology beyond one server (topology.go).
	pgbouncer     bool
	directURL     string
	standbyURLs   []string
	standbyMaxLag time.Duration
	log           *slog.Logger
}

// WithReadTimeout replaces DefaultReadTimeout; zero leaves reads unbounded.
func WithReadTimeout(d time.Duration) Option {
	return func(o *options) { o.readTimeout = d }
}

// Pool is how many connections a Store opens to PostgreSQL (SQLite has one, and one for
// Ping). A PostgreSQL server takes a fixed number of connections (max_connections, 100 by
// default, 3 of them kept for superusers): the replicas of the service, the command line and
// the operators' tools share them, so each replica's share is a setting.
type Pool struct {
	// MaxConns is the most connections the Store holds at once, all uses together: one
	// that listens for notifications (webhook events, trip updates, key changes), one for
	// Ping, two that write without waiting for the WAL flush (positions, the attempt log),
	// and the rest in the pool that serves requests and background work. At least
	// MinPoolConns.
	MaxConns int
	// MaxIdleConns is how many of the pool's connections stay open while idle, at most the
	// pool's size: opening one costs the server a process.
	MaxIdleConns int
}

// The connections a Store holds besides its pool.
const (
	listenConns = 1
	probeConns  = 1
	asyncConns  = 2
	sideConns   = listenConns + probeConns + asyncConns
)

// pgTooManyConnections is the SQLSTATE of a connection refused for want of a free one.
const pgTooManyConnections = "53300"

// MinPoolConns is the least Pool.MaxConns: the side connections and one in the pool.
const MinPoolConns = sideConns + 1

// DefaultPool lets 8 replicas share a PostgreSQL of the default max_connections (100, 97 for
// other roles than superusers) with 17 to spare: 10 connections each, 6 of them in the pool,
// all 6 kept while idle.
var DefaultPool = Pool{MaxConns: 10, MaxIdleConns: 10 - sideConns}

// PoolSize is how many of MaxConns connections serve requests and background work.
func (p Pool) PoolSize() int { return p.MaxConns - sideConns }

func (p Pool) check() error {
	switch {
	case p.MaxConns < MinPoolConns:
		return fmt.Errorf("store: a pool of %d connections is too small: %d at least (%d listen, probe and write apart)", p.MaxConns, MinPoolConns, sideConns)
	case p.MaxIdleConns < 0 || p.MaxIdleConns > p.PoolSize():
		return fmt.Errorf("store: %d idle connections do not fit a pool of %d", p.MaxIdleConns, p.PoolSize())
	}
	return nil
}

// WithPool replaces DefaultPool.
func WithPool(p Pool) Option {
	return func(o *options) { o.pool = p }
}

// boundReads makes every connection of cfg bound its reads by timeout (none when zero), and
// by the bound of the statement under way (see WithDeadline). The bounds sit on the connection
// rather than on each statement's context: a cancellable context would cost every query a
// watcher goroutine in database/sql and another in pgx.
func boundReads(cfg *pgx.ConnConfig, timeout time.Duration) {
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		// A connection opened for a bounded statement connects within its bound too.
		bound := graceOf(ctx)
		if bound != 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, time.Unix(0, bound))
			defer cancel()
		}
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		bc := &boundedConn{Conn: c, timeout: timeout}
		bc.bound.Store(bound)
		return bc, nil
	}
	cfg.Tracer = readBound{}
}

// boundedConn sets a read deadline before each read, unless unbounded (a connection that
// listens for notifications waits on purpose): its timeout from now, or sooner the bound of
// the statement under way, or sooner still a deadline pgx set itself (to interrupt a read
// when a statement's context ends).
type boundedConn struct {
	net.Conn
	timeout   time.Duration
	unbounded atomic.Bool
	// bound is the statement's bound, and external the read deadline pgx asked for, in Unix
	// nanoseconds; 0 for none.
	bound, external atomic.Int64
}

func (c *boundedConn) Read(p []byte) (int, error) {
	if !c.unbounded.Load() {
		var deadline int64
		if c.timeout > 0 {
			deadline = time.Now().Add(c.timeout).UnixNano()
		}
		for _, t := range [...]int64{c.bound.Load(), c.external.Load()} {
			if t != 0 && (deadline == 0 || t < deadline) {
				deadline = t
			}
		}
		at := time.Time{}
		if deadline != 0 {
			at = time.Unix(0, deadline)
		}
		_ = c.Conn.SetReadDeadline(at)
	}
	return c.Conn.Read(p)
}

func (c *boundedConn) SetDeadline(t time.Time) error {
	c.remember(t)
	return c.Conn.SetDeadline(t)
}

func (c *boundedConn) SetReadDeadline(t time.Time) error {
	c.remember(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *boundedConn) remember(t time.Time) {
	if t.IsZero() {
		c.external.Store(0)
	} else {
		c.external.Store(t.UnixNano())
	}
}

// waitWithoutBound lets conn's reads wait as long as their context says.
func waitWithoutBound(conn net.Conn) {
	if c := boundedOf(conn); c != nil {
		c.unbounded.Store(true)
		_ = c.Conn.SetReadDeadline(time.Time{})
	}
}

// Unavailable reports whether err means the database could not be reached or stopped
// answering, as opposed to refusing a statement: the connection was refused, reset or cut, a
// deadline ran out waiting for it (or for a connection of the pool), PostgreSQL said it is
// shutting down or starting (SQLSTATE class 08, 57P01 to 57P03), or it has no connection to
// spare (53300: max_connections, or the role's or the database's limit). Such a request may
// succeed when retried later.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P01", "57P02", "57P03", pgTooManyConnections:
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08")
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connectErr), errors.As(err, &netErr),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, driver.ErrBadConn),
		errors.Is(err, sql.ErrConnDone), // a transaction's connection gone before its statement (onTxConn)
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return true
	}
	// pgx reports a connection it had to close mid-statement in words only.
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "failed to connect") ||
		strings.Contains(msg, "timeout: context deadline exceeded")
}
