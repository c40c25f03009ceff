package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Both stores implement GCRA (the generic cell rate algorithm), which is a token bucket kept
// as one timestamp per key: the in-process one here, the shared one in Redis through
// redis_rate, so a key behaves the same with one replica or many.

// redisTimeout bounds one Redis round trip: past it the request is metered by the process
// alone rather than waiting on a sick cache.
const redisTimeout = 250 * time.Millisecond

// redisPause is how long the limiter leaves Redis alone after a failure: requests meanwhile
// cost no round trip at all.
const redisPause = 5 * time.Second

// redisLog sends the Redis client's own messages to the service's structured log.
type redisLog struct{ log *slog.Logger }

func (r redisLog) Printf(ctx context.Context, format string, v ...any) {
	r.log.WarnContext(ctx, "redis client", slog.String("message", fmt.Sprintf(format, v...)))
}

// fallbackBuckets meters with Redis while it answers and with the process's own buckets
// while it does not: after a failure Redis is skipped for redisPause, so an outage costs one
// bounded round trip every few seconds, not one per request, and answers keep their
// RateLimit headers (each replica then meters on its own). The outage is logged when it
// starts and when it ends.
type fallbackBuckets struct {
	shared buckets
	local  *memoryBuckets
	now    func() time.Time
	log    *slog.Logger
	errors prometheus.Counter

	mu        sync.Mutex
	pauseTill time.Time
	down      bool
}

func (f *fallbackBuckets) take(ctx context.Context, key string, l bucketLimit) (quota, error) {
	return f.use(ctx, key, l, buckets.take)
}

func (f *fallbackBuckets) refund(ctx context.Context, key string, l bucketLimit) (quota, error) {
	return f.use(ctx, key, l, buckets.refund)
}

func (f *fallbackBuckets) use(ctx context.Context, key string, l bucketLimit,
	op func(buckets, context.Context, string, bucketLimit) (quota, error)) (quota, error) {
	f.mu.Lock()
	paused := f.now().Before(f.pauseTill)
	f.mu.Unlock()
	if !paused {
		q, err := op(f.shared, ctx, key, l)
		f.mu.Lock()
		wasDown := f.down
		if err == nil {
			f.down = false
		} else if ctx.Err() == nil {
			f.down = true
			f.pauseTill = f.now().Add(redisPause)
		}
		f.mu.Unlock()
		switch {
		case err != nil && ctx.Err() != nil:
			return quota{}, err // the caller gave up; no bucket should change on its behalf
		case err == nil:
			if wasDown {
				f.log.InfoContext(ctx, "rate limit store answers again; limits are shared across replicas")
			}
			return q, nil
		case !wasDown && ctx.Err() == nil:
			f.log.WarnContext(ctx, "rate limit store unreachable; metering per process until it answers",
				slog.String("error", err.Error()), slog.Duration("retry_in", redisPause))
		}
	}
	f.errors.Inc()
	return op(f.local, ctx, key, l)
}

func (f *fallbackBuckets) close() error { return f.shared.close() }

// gcraQuota describes a bucket whose theoretical arrival time is tat: the bucket is full when
// tat is not after now, and each interval tat lies ahead of now is one token missing.
func gcraQuota(now, tat time.Time, l bucketLimit) quota {
	interval := l.interval()
	ahead := tat.Sub(now)
	if ahead < 0 {
		ahead = 0
	}
	missing := int((ahead + interval - 1) / interval) // rounded up: a part-token is no token
	return quota{allowed: true, limit: l.burst, remaining: max(l.burst-missing, 0), reset: ahead}
}

// memoryBuckets keeps the buckets of one process. A bucket that has refilled is the same as
// no bucket, so idle keys are dropped by a sweep at most once a minute.
type memoryBuckets struct {
	now func() time.Time

	mu        sync.Mutex
	tat       map[string]time.Time
	lastSweep time.Time
}

const memorySweepEvery = time.Minute

func newMemoryBuckets(now func() time.Time) *memoryBuckets {
	return &memoryBuckets{now: now, tat: map[string]time.Time{}, lastSweep: now()}
}

func (m *memoryBuckets) take(_ context.Context, key string, l bucketLimit) (quota, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.sweep(now)
	interval := l.interval()
	tat := m.tat[key]
	if tat.Before(now) {
		tat = now
	}
	next := tat.Add(interval)
	allowAt := next.Add(-time.Duration(l.burst) * interval)
	if now.Before(allowAt) {
		return quota{limit: l.burst, reset: tat.Sub(now), retryAfter: allowAt.Sub(now)}, nil
	}
	m.tat[key] = next
	return gcraQuota(now, next, l), nil
}

func (m *memoryBuckets) refund(_ context.Context, key string, l bucketLimit) (quota, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	tat, ok := m.tat[key]
	if ok {
		tat = tat.Add(-l.interval())
		if tat.After(now) {
			m.tat[key] = tat
		} else {
			delete(m.tat, key)
		}
	}
	return gcraQuota(now, tat, l), nil
}

func (m *memoryBuckets) sweep(now time.Time) {
	if now.Sub(m.lastSweep) < memorySweepEvery {
		return
	}
	m.lastSweep = now
	for key, tat := range m.tat {
		if !tat.After(now) {
			delete(m.tat, key)
		}
	}
}

func (m *memoryBuckets) close() error { return nil }

// size is the number of keys held, for tests of the sweep.
func (m *memoryBuckets) size() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.tat)
}

// redisBuckets shares the buckets of every replica through Redis: redis_rate runs GCRA as one
// atomic script on Redis's clock, so replicas need not agree on the time.
type redisBuckets struct {
	client  *redis.Client
	limiter *redis_rate.Limiter
}

func (r *redisBuckets) take(ctx context.Context, key string, l bucketLimit) (quota, error) {
	return r.allowN(ctx, key, l, 1)
}

// refund is a take of -1 tokens: the script moves the key's arrival time back one interval.
func (r *redisBuckets) refund(ctx context.Context, key string, l bucketLimit) (quota, error) {
	return r.allowN(ctx, key, l, -1)
}

func (r *redisBuckets) allowN(ctx context.Context, key string, l bucketLimit, n int) (quota, error) {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	res, err := r.limiter.AllowN(ctx, key, redis_rate.Limit{Rate: l.rate, Burst: l.burst, Period: l.period}, n)
	if err != nil {
		return quota{}, fmt.Errorf("redis rate limit: %w", err)
	}
	q := quota{
		allowed:   res.Allowed != 0,
		limit:     l.burst,
		remaining: min(max(res.Remaining, 0), l.burst),
		reset:     max(res.ResetAfter, 0),
	}
	if !q.allowed {
		q.retryAfter = res.RetryAfter
	}
	return q, nil
}

func (r *redisBuckets) close() error { return r.client.Close() }
