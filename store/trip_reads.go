package store

import (
	"context"
	"errors"
	"sync"
	"time"

	"gorm.io/gorm"
)

// Reading one trip by id is the hottest query there is (GET /v1/trips/{id}, GraphQL's trip),
// and most of its cost is per statement, not per row: PostgreSQL reads many more trips a
// second when a statement carries several ids, and database/sql and GORM add their cost per
// statement on our side too (figures in tests/ridebench/README.md).
//
// So reads of single trips that arrive while the database is busy with earlier ones go
// together: a read that finds fewer than tripReadStatements statements under way runs at once,
// alone, as before (an idle server adds no wait); one that does not waits for the next
// statement, which carries every read waiting when it starts (up to tripReadBatch). When a
// statement ends, its first waiting read leads the next one. A read still sees every write
// committed before it was asked: the statement that answers it starts after that.
//
// Transactions read directly: their reads must see their own writes and hold their locks.
const (
	// tripReadStatements is how many statements may read trips by id at once: with one, every
	// read queues behind a single statement however many cores the database has; with as
	// many as there are requests, nothing is shared. Two keeps both a database core busy and
	// reads shared under load.
	tripReadStatements = 2
	// tripReadBatch bounds the ids of one statement.
	tripReadBatch = 32
)

// tripReads coalesces concurrent TripByID calls on a pool Store.
type tripReads struct {
	s *Store

	mu      sync.Mutex
	running int
	waiting []*tripRead
}

// tripRead is one caller's read, and the message that wakes it.
type tripRead struct {
	id    string
	reach TripReach
	// deadline is when its caller stops waiting (ctx's deadline); zero for never.
	deadline time.Time
	// standby is the standby its caller may read from (standbys.route); nil for the primary.
	standby *gorm.DB
	trip    Trip
	err     error
	// lead, when set as the read wakes, is the batch it must now run (itself first).
	lead []*tripRead
	wake chan struct{}
}

var tripReadPool = sync.Pool{New: func() any { return &tripRead{wake: make(chan struct{}, 1)} }}

// errTripReadAbandoned answers reads whose statement panicked.
var errTripReadAbandoned = errors.New("store: trip read abandoned")

// read returns the trip with id within reach, with its driver, or ErrNotFound. A read that
// waits for a statement waits no longer than ctx allows: a database that stalls the
// statements under way must not hold the reads behind them past their callers' bound.
func (t *tripReads) read(ctx context.Context, id string, reach TripReach) (Trip, error) {
	r := tripReadPool.Get().(*tripRead)
	r.id, r.reach = id, reach
	r.deadline, _ = Deadline(ctx)
	if t.s.standbys != nil {
		r.standby = t.s.standbys.route(ctx)
	}
	t.mu.Lock()
	if t.running < tripReadStatements {
		t.running++
		t.mu.Unlock()
		t.run(ctx, []*tripRead{r})
	} else {
		t.waiting = append(t.waiting, r)
		t.mu.Unlock()
		if err := t.await(ctx, r); err != nil {
			*r = tripRead{wake: r.wake}
			tripReadPool.Put(r)
			return Trip{}, err
		}
		if r.lead != nil {
			t.run(ctx, r.lead)
		}
	}
	trip, err := r.trip, r.err
	*r = tripRead{wake: r.wake}
	tripReadPool.Put(r)
	return trip, err
}

// run reads the trips of batch in one statement, hands the statement slot to the reads that
// waited meanwhile and wakes batch's other reads with their answers. batch[0] is the caller's.
func (t *tripReads) run(ctx context.Context, batch []*tripRead) {
	defer t.finish(batch)
	for _, r := range batch {
		r.err = errTripReadAbandoned
	}
	if len(batch) > 1 {
		// The statement answers every read of the batch: it must not fail because the caller
		// leading it went away, and must end by the first deadline of the others, so that
		// none of their callers waits past its own. A read whose caller's deadline passed while
		// it waited is answered so, and left out.
		ctx = context.WithoutCancel(ctx)
		now := time.Now()
		live := make([]*tripRead, 0, len(batch))
		var first time.Time
		for _, r := range batch {
			switch {
			case r.deadline.IsZero():
			case !r.deadline.After(now):
				r.err = context.DeadlineExceeded
				continue
			case first.IsZero() || r.deadline.Before(first):
				first = r.deadline
			}
			live = append(live, r)
		}
		if !first.IsZero() {
			ctx = WithDeadline(ctx, first)
		} else {
			ctx = WithoutDeadline(ctx)
		}
		batch = live
		if len(batch) == 0 {
			return
		}
	}
	if t.s.standbys != nil {
		// One statement for all: on a standby only if every read of the batch may read there.
		to := batch[0].standby
		for _, r := range batch[1:] {
			if r.standby != to {
				to = nil
			}
		}
		ctx = routed(ctx, to)
	}
	n := len(batch)
	vars := make([]any, 3*n)
	for i, r := range batch {
		vars[i], vars[n+i], vars[2*n+i] = r.id, r.reach.Account, r.reach.DriverID
	}
	trips, err := t.s.tripsByPrebuilt(ctx, t.s.sql.tripsWithin[n], vars)
	for _, r := range batch {
		r.err = err
		if err != nil {
			continue
		}
		// The statement bounds the rows by every read's reach at once; each read takes only a
		// row within its own.
		r.err = ErrNotFound
		for i := range trips {
			if trips[i].ID == r.id && r.reach.has(&trips[i]) {
				r.trip, r.err = trips[i], nil
				break
			}
		}
	}
}

// await waits until a statement takes r, unless ctx ends or r's deadline passes first: then r
// has left the waiting reads, and the error says why.
func (t *tripReads) await(ctx context.Context, r *tripRead) error {
	expired, stop := untilBound(r.deadline, !r.deadline.IsZero())
	defer stop()
	var err error
	select {
	case <-r.wake:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-expired:
		err = context.DeadlineExceeded
	}
	if t.leave(r) {
		return err
	}
	<-r.wake // a statement took it meanwhile: its answer, or its batch to lead, comes
	return nil
}

// leave takes r out of the waiting reads, unless a statement has taken it already (false).
func (t *tripReads) leave(r *tripRead) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, w := range t.waiting {
		if w == r {
			t.waiting = append(t.waiting[:i:i], t.waiting[i+1:]...)
			return true
		}
	}
	return false
}

func (t *tripReads) finish(batch []*tripRead) {
	t.mu.Lock()
	var next []*tripRead
	if n := min(len(t.waiting), tripReadBatch); n > 0 {
		next = t.waiting[:n:n]
		t.waiting = t.waiting[n:]
	} else {
		t.running--
	}
	t.mu.Unlock()
	if next != nil {
		next[0].lead = next
		next[0].wake <- struct{}{}
	}
	for _, r := range batch[1:] {
		r.wake <- struct{}{}
	}
}
