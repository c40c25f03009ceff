package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"
)

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
