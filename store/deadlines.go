package store

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"
)

// A request bounds its wait for the database in all (RIDE_DB_TIMEOUT). The bound travels in
// its context as a value, not as a cancellable context: database/sql starts a goroutine for
// every statement run with a cancellable context, which costs a read by id a fifth of its
// time. The value bounds the three waits a request can meet instead:
//   - for a connection of the pool: statements take a turn (admission) before they reach
//     the pool, never more at once than it has connections, and wait for one no longer than
//     their bound;
//   - for a new connection: its dial and its handshake (boundReads);
//   - for the server's answers: each read of the connection stops at the bound (with a grace
//     for a statement that began late, statementGrace), on top of the connection's own read
//     timeout (readBound).
//
// A bound running out mid-statement ends its connection, as a cancelled context would.

type boundKey struct{}

// boundCtx carries a bound (WithDeadline) in one allocation: context.WithValue would box the
// time in a second one.
type boundCtx struct {
	context.Context
	at time.Time // zero: no bound
}

func (c *boundCtx) Value(key any) any {
	if _, ok := key.(boundKey); ok {
		return &c.at
	}
	return c.Context.Value(key)
}

// WithDeadline bounds the database work done with the returned context by at, replacing any
// bound ctx carries: a stream's reads, long after its request, each get their own.
func WithDeadline(ctx context.Context, at time.Time) context.Context {
	return &boundCtx{Context: ctx, at: at}
}

// WithoutDeadline drops the bound ctx carries, for work that outlives its request.
func WithoutDeadline(ctx context.Context) context.Context {
	if ctx.Value(boundKey{}) == nil {
		return ctx
	}
	return &boundCtx{Context: ctx}
}

// Deadline is when the database work done with ctx must end: its bound (WithDeadline), or
// else ctx's own deadline.
func Deadline(ctx context.Context) (time.Time, bool) {
	if at, ok := ctx.Value(boundKey{}).(*time.Time); ok {
		return *at, !at.IsZero()
	}
	return ctx.Deadline()
}

// boundOf is ctx's bound (WithDeadline) in Unix nanoseconds; 0 for none.
func boundOf(ctx context.Context) int64 {
	if at, _ := ctx.Value(boundKey{}).(*time.Time); at != nil && !at.IsZero() {
		return at.UnixNano()
	}
	return 0
}

// statementGrace is how long a statement that has begun (or a connection being opened for it)
// may go on past its bound. Cutting it mid-read costs its connection, and a pool under pressure
// that cuts the statements which got their turn late would kill and open connections as fast
// as it serves: each a process forked on the server. A database that stalls still ends a
// statement this soon after its bound.
const statementGrace = 500 * time.Millisecond

// graceOf is ctx's bound with the grace of a statement starting now, in Unix nanoseconds; 0
// for none. A statement starting past its bound has none: it fails at its first read.
func graceOf(ctx context.Context) int64 {
	bound := boundOf(ctx)
	if bound == 0 {
		return 0
	}
	now := time.Now().UnixNano()
	if now >= bound {
		return bound
	}
	return max(bound, now+int64(statementGrace))
}

// admission lets statements into a pool no more at once than it has connections, so that none
// waits inside database/sql, where only a cancellable context would bound the wait: they wait
// for their turn here instead, until their context ends or their deadline (Deadline) passes.
// A statement holds its turn while it holds its connection: until it returns, or for a
// transaction until it ends. (Rows a statement returns hold the connection a little longer,
// until they are read, which their own bound limits.)
type admission struct {
	turns chan struct{}
}

func newAdmission(n int) *admission {
	return &admission{turns: make(chan struct{}, n)}
}

// errNotAdmitted is a statement that ran out of time waiting for its turn.
type errNotAdmitted struct{ cause error }

func (e errNotAdmitted) Error() string {
	return "store: no connection of the pool came free in time: " + e.cause.Error()
}

func (e errNotAdmitted) Unwrap() error { return e.cause }

// untilBound is a channel that receives once the bound at passes, and the function that
// releases its timer: what every wait of a statement (for a turn, a batch, a shared read)
// selects on beside its context. Without a bound (bounded false), a channel that never
// receives.
func untilBound(at time.Time, bounded bool) (expired <-chan time.Time, stop func() bool) {
	if !bounded {
		return nil, noTimer
	}
	timer := time.NewTimer(time.Until(at))
	return timer.C, timer.Stop
}

func noTimer() bool { return false }

// enter waits for a turn; leave gives it back. A statement whose bound has passed gets none.
func (a *admission) enter(ctx context.Context) error {
	if at, ok := Deadline(ctx); ok && !time.Now().Before(at) {
		return errNotAdmitted{context.DeadlineExceeded}
	}
	select {
	case a.turns <- struct{}{}:
		return nil
	default:
	}
	expired, stop := untilBound(Deadline(ctx))
	defer stop()
	select {
	case a.turns <- struct{}{}:
		return nil
	case <-ctx.Done():
		return errNotAdmitted{ctx.Err()}
	case <-expired:
		return errNotAdmitted{context.DeadlineExceeded}
	}
}

func (a *admission) leave() { <-a.turns }

// register makes every statement db runs on the pool take a turn.
func (a *admission) register(db *gorm.DB) error {
	cb := db.Callback()
	type hook = func(name string, fn func(*gorm.DB)) error
	for _, h := range []struct {
		name          string
		before, after hook
	}{
		{"gorm:create", cb.Create().Before("gorm:create").Register, cb.Create().After("gorm:create").Register},
		{"gorm:query", cb.Query().Before("gorm:query").Register, cb.Query().After("gorm:query").Register},
		{"gorm:update", cb.Update().Before("gorm:update").Register, cb.Update().After("gorm:update").Register},
		{"gorm:delete", cb.Delete().Before("gorm:delete").Register, cb.Delete().After("gorm:delete").Register},
		{"gorm:row", cb.Row().Before("gorm:row").Register, cb.Row().After("gorm:row").Register},
		{"gorm:raw", cb.Raw().Before("gorm:raw").Register, cb.Raw().After("gorm:raw").Register},
	} {
		if err := h.before("ride:admission", a.admit); err != nil {
			return fmt.Errorf("store: hook %s: %w", h.name, err)
		}
		if err := h.after("ride:admission_end", a.release); err != nil {
			return fmt.Errorf("store: hook %s: %w", h.name, err)
		}
	}
	return nil
}

// fromPool tells whether db's statement takes a connection from the pool: not inside a
// transaction, which holds its own, nor when GORM only builds its SQL (a subquery's).
func fromPool(db *gorm.DB) bool {
	_, inTx := db.Statement.ConnPool.(gorm.TxCommitter)
	return !inTx && !db.DryRun
}

// turnKey marks the context of a statement that took a turn: its held flag tells release
// whether to give the turn back, whatever the statement's error.
type turnKey struct{}

// turn is a statement's turn at the pool.
type turn struct {
	a    *admission
	held bool
}

// turnOf is the turn of the statement ctx belongs to; nil outside the pool.
func turnOf(ctx context.Context) *turn {
	t, _ := ctx.Value(turnKey{}).(*turn)
	return t
}

// lend gives the turn back while its statement waits for another to end (a shared read):
// waiting, it holds no connection, and a turn held idle would keep another statement from
// the pool until its bound. take takes one again, within ctx's bound.
func (t *turn) lend() {
	if t != nil && t.held {
		t.held = false
		t.a.leave()
	}
}

func (t *turn) take(ctx context.Context) error {
	if t == nil || t.held {
		return nil
	}
	if err := t.a.enter(ctx); err != nil {
		return err
	}
	t.held = true
	return nil
}

func (a *admission) admit(db *gorm.DB) {
	if !fromPool(db) {
		return
	}
	t := &turn{a: a}
	db.Statement.Context = context.WithValue(db.Statement.Context, turnKey{}, t)
	if err := t.take(db.Statement.Context); err != nil {
		_ = db.AddError(err)
	}
}

func (a *admission) release(db *gorm.DB) {
	turnOf(db.Statement.Context).lend()
}

// readBound caps the reads of each statement's connection at the statement's bound.
type readBound struct{}

func (readBound) TraceQueryStart(ctx context.Context, conn *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	if c := boundedOf(conn.PgConn().Conn()); c != nil {
		c.bound.Store(graceOf(ctx))
	}
	return ctx
}

func (readBound) TraceQueryEnd(_ context.Context, conn *pgx.Conn, _ pgx.TraceQueryEndData) {
	if c := boundedOf(conn.PgConn().Conn()); c != nil {
		c.bound.Store(0)
	}
}

// boundedOf is the boundedConn under conn, or nil.
func boundedOf(conn net.Conn) *boundedConn {
	if t, ok := conn.(*tls.Conn); ok {
		conn = t.NetConn()
	}
	c, _ := conn.(*boundedConn)
	return c
}
