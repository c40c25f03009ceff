package store

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"reflect"
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
	under map[shareKey]*shareSlot
}

// shares holds every pool's statements: the pool is part of the key.
var shares = readShares{under: map[shareKey]*shareSlot{}}

type shareKey struct {
	pool *sql.DB
	text string // the statement's text, then its arguments (shareText)
}

// shareSlot is one statement under way, and the reads waiting for the next.
type shareSlot struct {
	next *sharedRead
}

// sharedRead is one statement that answers several reads.
type sharedRead struct {
	start chan struct{} // closed when the statement before it ended: it may run
	done  chan struct{} // closed when trips, extra and err are its answer
	trips []Trip
	extra []any // the leader's destinations of the extra columns, filled
	err   error
	// readers is how many reads it answers, its leader's included.
	readers int
}

// shareHold, when set (by specs), runs while a statement is under way, after its rows are read
// and before it ends for the reads waiting for the next.
var shareHold func()

// read runs query on pool and scans its trips, sharing the statement with identical reads
// (see above). The trips of a shared statement are every reader's: their pointers (addresses,
// times, the driver's position) must not be written through.
func (s *readShares) read(ctx context.Context, pool *sql.DB, query string, vars []any, expected int, extra ...any) ([]Trip, error) {
	text, ok := shareText(query, vars)
	if !ok {
		return pgxTrips(ctx, pool, query, vars, expected, extra...)
	}
	key := shareKey{pool: pool, text: text}
	s.mu.Lock()
	slot, busy := s.under[key]
	if !busy {
		s.under[key] = &shareSlot{}
		s.mu.Unlock()
		defer s.end(key)
		trips, err := pgxTrips(ctx, pool, query, vars, expected, extra...)
		if shareHold != nil {
			shareHold()
		}
		return trips, err
	}
	if next := slot.next; next != nil {
		next.readers++
		s.mu.Unlock()
		return next.await(ctx, extra)
	}
	// This read leads the next statement: it runs it when the one under way ends, for every
	// read that joins meanwhile. It waits for that unconditionally (the statement under way
	// is bounded by its own deadline and the connection's read timeout) and runs it whatever
	// becomes of its own caller, since others wait for the answer.
	next := &sharedRead{start: make(chan struct{}), done: make(chan struct{}), extra: extra, err: errTripReadAbandoned, readers: 1}
	slot.next = next
	s.mu.Unlock()
	<-next.start
	defer func() {
		close(next.done) // with errTripReadAbandoned if the statement panicked
		s.end(key)
	}()
	at, bounded := Deadline(ctx)
	if ctx = context.WithoutCancel(ctx); bounded {
		ctx = WithDeadline(ctx, at)
	}
	trips, err := pgxTrips(ctx, pool, query, vars, expected, extra...)
	if shareHold != nil {
		shareHold()
	}
	next.trips, next.err = trips, err
	return trips, err
}

// end ends the statement under way for key: the next one starts, or the key is free.
func (s *readShares) end(key shareKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	slot := s.under[key]
	if slot.next == nil {
		delete(s.under, key)
		return
	}
	close(slot.next.start)
	s.under[key] = &shareSlot{}
}

// await waits for the shared statement's answer, or for ctx to end, and gives the caller its
// own copy of the trips and of the extra columns.
func (r *sharedRead) await(ctx context.Context, extra []any) ([]Trip, error) {
	select {
	case <-r.done:
	case <-ctx.Done():
		return nil, ctx.Err()
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

// shareText is the statement's text and its arguments as one string, which equal strings only
// for identical statements; false when an argument is of a kind it does not spell (such a
// read runs alone).
func shareText(query string, vars []any) (string, bool) {
	b := make([]byte, 0, len(query)+16*len(vars))
	b = append(b, query...)
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
