package store

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Identical trip reads that arrive while the same statement is under way share the next one.
// Many callers ask the very same question at once: the first page of an account's trips that
// every dashboard of the account polls, a trip its rider, its driver and the admins follow.
// Each such statement costs PostgreSQL what the first did; shared, it costs that once.
//
// Statements are identical when their text, their arguments and their pool are: the account,
// the caller's reach, the filters and the cursor are all arguments, so a shared answer is
// exactly the one each caller's own statement would have had. A read that finds no identical
// statement under way runs at once, alone (an idle server adds no wait). One that finds one
// does not join it, which may have begun before the caller's last write committed: it waits for
// the statement after it, which starts once that one ends and carries every identical read that
// came meanwhile. So a read still sees every write committed before it was asked.
//
// Only pool reads through pgx share (rowQuery): a transaction's reads must see its own writes.

// readShares are the identical statements under way, by pool and text.
type readShares struct {
	mu    sync.Mutex
	under map[shareKey]shareSlot
}

// shares holds every pool's statements: the pool is part of the key.
var shares = readShares{under: map[shareKey]shareSlot{}}

type shareKey struct {
	pool  *sql.DB
	query string
	args  string // spelled out by shareArgs
}

// shareSlot is one statement under way, and the reads waiting for the next.
type shareSlot struct {
	next *sharedRead
}

// sharedRead is one statement that answers several reads. Its fields but done's are guarded by
// readShares.mu until done is closed.
type sharedRead struct {
	start chan struct{} // closed when the statement before it ended: it may run
	done  chan struct{} // closed when trips, extra and err are its answer
	// waiting is how many of its reads wait for it to start; started and led say whether it
	// may start and whether one of them took it on.
	waiting      int
	started, led bool
	trips        []Trip
	extra        []any // the leader's destinations of the extra columns, filled
	err          error
}

// shareHold, when set (by specs), runs while a statement is under way, after its rows are read
// and before it ends for the reads waiting for the next.
var shareHold func()

// read runs query on pool and scans its trips, sharing the statement with identical reads
// (see above). The trips of a shared statement are every reader's: their pointers (addresses,
// times, the driver's position) must not be written through.
//
// A read waits for a shared statement no longer than its caller's bound (Deadline): a database
// that stalls the statement under way must not hold the identical reads behind it past theirs.
// The first read still waiting when the statement may start runs it, within its own bound and
// whatever becomes of its caller, since others wait for the answer. The others share that
// bound: a statement that outlasts it fails for all of them, a little before the bounds of
// those who asked after the leader.
func (s *readShares) read(ctx context.Context, pool *sql.DB, query string, vars []any, expected int, extra ...any) ([]Trip, error) {
	args, ok := shareArgs(vars)
	if !ok {
		return pgxTrips(ctx, pool, query, vars, expected, extra...)
	}
	key := shareKey{pool: pool, query: query, args: args}
	s.mu.Lock()
	slot, busy := s.under[key]
	if !busy {
		s.under[key] = shareSlot{}
		s.mu.Unlock()
		defer s.end(key)
		return s.run(ctx, pool, query, vars, expected, extra)
	}
	next := slot.next
	if next == nil {
		next = &sharedRead{start: make(chan struct{}), done: make(chan struct{})}
		s.under[key] = shareSlot{next: next}
	}
	next.waiting++
	s.mu.Unlock()
	turn := turnOf(ctx)
	turn.lend()

	at, bounded := Deadline(ctx)
	expired, stop := untilBound(at, bounded)
	defer stop()
	var err error
	select {
	case <-next.start:
		// The statement under way may end just as the bound passes, above all when it used
		// up a bound the reads behind it share. A read with less than a statement's grace
		// left starts none (the statement would run on past the bound, statementGrace): it
		// answers as its bound passing would have it answer.
		if bounded && time.Until(at) < statementGrace {
			err = context.DeadlineExceeded
		}
	case <-ctx.Done():
		err = ctx.Err()
	case <-expired:
		err = context.DeadlineExceeded
	}
	s.mu.Lock()
	next.waiting--
	switch {
	case err != nil:
		// Gone before the statement could start. If it may start now and nobody is left to
		// run it, the key is free again.
		orphaned := next.started && !next.led && next.waiting == 0
		s.mu.Unlock()
		if orphaned {
			s.end(key)
		}
		return nil, err
	case !next.led:
		next.led, next.extra = true, extra
		s.mu.Unlock()
		defer func() {
			close(next.done) // with errTripReadAbandoned if the statement panicked
			s.end(key)
		}()
		if next.err = turn.take(ctx); next.err != nil {
			return nil, next.err
		}
		next.err = errTripReadAbandoned
		if ctx = context.WithoutCancel(ctx); bounded {
			ctx = WithDeadline(ctx, at)
		}
		next.trips, next.err = s.run(ctx, pool, query, vars, expected, extra)
		if next.err != nil {
			return nil, next.err
		}
		// The leader's caller may trim and reorder its page in place (a backward page is read
		// in reverse) while the others copy theirs from next.trips.
		return slices.Clone(next.trips), nil
	}
	s.mu.Unlock()
	return next.await(ctx, expired, extra)
}

// run runs the statement under way for key.
func (s *readShares) run(ctx context.Context, pool *sql.DB, query string, vars []any, expected int, extra []any) ([]Trip, error) {
	trips, err := pgxTrips(ctx, pool, query, vars, expected, extra...)
	if shareHold != nil {
		shareHold()
	}
	return trips, err
}

// end ends the statement under way for key: the next one may start, or the key is free.
func (s *readShares) end(key shareKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	slot := s.under[key]
	next := slot.next
	if next == nil || next.waiting == 0 {
		delete(s.under, key)
		return
	}
	next.started = true
	close(next.start)
	s.under[key] = shareSlot{}
}

// await waits for the shared statement's answer, unless ctx ends or the caller's bound passes
// (expired) first, and gives the caller its own copy of the trips and of the extra columns.
func (r *sharedRead) await(ctx context.Context, expired <-chan time.Time, extra []any) ([]Trip, error) {
	select {
	case <-r.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-expired:
		return nil, context.DeadlineExceeded
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(extra) != len(r.extra) {
		return nil, fmt.Errorf("store: a shared read with %d extra columns, asked for %d", len(r.extra), len(extra))
	}
	for i, dst := range extra {
		to, from := reflect.ValueOf(dst), reflect.ValueOf(r.extra[i])
		if to.Type() != from.Type() || to.Kind() != reflect.Pointer {
			return nil, fmt.Errorf("store: a shared read's extra column %d is a %s, asked for a %s", i, from.Type(), to.Type())
		}
		to.Elem().Set(from.Elem())
	}
	return append(make([]Trip, 0, len(r.trips)), r.trips...), nil
}

// shareArgs spells a statement's arguments as one string, which equal strings only for equal
// arguments; false when an argument is of a kind it does not spell (such a read runs alone).
func shareArgs(vars []any) (string, bool) {
	var room [160]byte
	b := room[:0]
	for _, v := range vars {
		b = append(b, 0)
		switch v := v.(type) {
		case string:
			b = append(b, 's')
			b = strconv.AppendInt(b, int64(len(v)), 10)
			b = append(b, ':')
			b = append(b, v...)
		case int:
			b = append(b, 'i')
			b = strconv.AppendInt(b, int64(v), 10)
		case int64:
			b = append(b, 'i')
			b = strconv.AppendInt(b, v, 10)
		case int32:
			b = append(b, 'i')
			b = strconv.AppendInt(b, int64(v), 10)
		case bool:
			b = append(b, 'b')
			b = strconv.AppendBool(b, v)
		case float64:
			b = append(b, 'f')
			b = strconv.AppendUint(b, math.Float64bits(v), 16)
		case time.Time:
			// The instant and the zone's offset: the driver sends both.
			_, offset := v.Zone()
			b = append(b, 't')
			b = strconv.AppendInt(b, v.Unix(), 10)
			b = append(b, '.')
			b = strconv.AppendInt(b, int64(v.Nanosecond()), 10)
			b = append(b, '@')
			b = strconv.AppendInt(b, int64(offset), 10)
		default:
			return "", false
		}
	}
	return string(b), true
}
