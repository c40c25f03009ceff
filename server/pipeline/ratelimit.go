package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/problem"
)

// Rate limits: each API key has two token buckets, one for reads (GET, HEAD and GraphQL
// queries) and one for writes (POST, PUT, DELETE). A bucket holds twice its per-second rate
// and refills continuously. The gate takes a token right after authentication; a 304 gives it
// back (respond.go), because revalidating an unchanged representation costs us next to
// nothing and is exactly what we want clients to do.

// limitClass is the budget a request draws on.
type limitClass uint8

const (
	classRead limitClass = iota
	classWrite
)

func (c limitClass) String() string {
	if c == classWrite {
		return "write"
	}
	return "read"
}

// classify puts an operation in a budget: safe methods and GraphQL (a query language over
// POST) are reads; everything else, fare estimates included, writes.
func classify(method, path string) limitClass {
	switch {
	case method == http.MethodGet || method == http.MethodHead:
		return classRead
	case path == "/v1/graphql":
		return classRead
	default:
		return classWrite
	}
}

// bucketLimit is one budget: rate tokens per period, at most burst in the bucket.
type bucketLimit struct {
	rate   int
	burst  int
	period time.Duration
}

func (l bucketLimit) interval() time.Duration { return l.period / time.Duration(l.rate) }

// quota is a bucket after a take or a refund.
type quota struct {
	allowed    bool
	limit      int           // the bucket's size
	remaining  int           // whole tokens left
	reset      time.Duration // until the bucket is full again
	retryAfter time.Duration // until the next token, when not allowed
}

// buckets stores token buckets by key.
type buckets interface {
	take(ctx context.Context, key string, l bucketLimit) (quota, error)
	refund(ctx context.Context, key string, l bucketLimit) (quota, error)
	close() error
}

// rateLimiter meters authenticated requests per API key. It is the gate's limiter.
type rateLimiter struct {
	limits  [2]bucketLimit // by limitClass; rate 0 is off
	buckets buckets
	prefix  string
	log     *slog.Logger
	metrics *Metrics
}

// RateLimits are each API key's request budgets.
type RateLimits struct {
	// Read and Write are the budgets in requests per Period; a bucket holds twice its rate.
	// Zero turns that limit off.
	Read, Write int
	// Period is the period of those rates: a second when zero.
	Period time.Duration
	// RedisURL shares the buckets between replicas through Redis; empty keeps them in the
	// process.
	RedisURL string
	// KeyPrefix namespaces the buckets in Redis ("ride:" when empty).
	KeyPrefix string
}

// newRateLimiter builds the limiter cfg asks for, or nil when both limits are off.
func newRateLimiter(cfg RateLimits, log *slog.Logger, metrics *Metrics) (*rateLimiter, error) {
	if cfg.Read <= 0 && cfg.Write <= 0 {
		return nil, nil
	}
	period := cfg.Period
	if period <= 0 {
		period = time.Second
	}
	l := &rateLimiter{prefix: cfg.KeyPrefix, log: log, metrics: metrics}
	if l.prefix == "" {
		l.prefix = "ride:"
	}
	for class, rate := range map[limitClass]int{classRead: cfg.Read, classWrite: cfg.Write} {
		if rate > 0 {
			l.limits[class] = bucketLimit{rate: rate, burst: 2 * rate, period: period}
		}
	}
	if cfg.RedisURL == "" {
		l.buckets = newMemoryBuckets(time.Now)
		return l, nil
	}
	opts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, errors.New("REDIS_URL does not parse") // its text may quote the password
	}
	// One attempt per request, bounded: a retry would only make the caller wait longer for
	// the same answer, and the local buckets stand in meanwhile.
	opts.MaxRetries = -1
	opts.DialerRetries = 1
	opts.DialerRetryTimeout = time.Microsecond // the client sleeps this long after a failed dial
	opts.DialTimeout = redisTimeout
	opts.ReadTimeout = redisTimeout
	opts.WriteTimeout = redisTimeout
	opts.PoolTimeout = redisTimeout
	redis.SetLogger(redisLog{log})
	client := redis.NewClient(opts)
	l.buckets = &fallbackBuckets{
		shared: &redisBuckets{client: client, limiter: redis_rate.NewLimiter(client)},
		local:  newMemoryBuckets(time.Now),
		now:    time.Now,
		log:    log,
		errors: metrics.rateLimitErrors,
	}
	return l, nil
}

func (l *rateLimiter) close() error { return l.buckets.close() }

type rateChargeKey struct{}

// rateCharge is what admit leaves for respond.go: the token to give back if the answer turns
// out to be a 304, or, when the bucket was empty, the 429 to send unless it is one.
type rateCharge struct {
	limiter *rateLimiter
	key     string
	limit   bucketLimit
	denied  *problem.Error
}

func rateChargeFrom(ctx context.Context) *rateCharge {
	ch, _ := ctx.Value(rateChargeKey{}).(*rateCharge)
	return ch
}

// admit spends one token of the caller's budget for the operation, writes the RateLimit-*
// headers, and answers 429 when the bucket is empty. A conditional GET on an empty bucket
// goes on all the same, marked as overdrawn: if it ends in a 304 it is answered (a 304 is
// free), and otherwise respond.go turns it into the 429.
func (l *rateLimiter) admit(ctx context.Context, req *http.Request, header http.Header, p auth.Principal, info *operationInfo) (context.Context, error) {
	class := info.class
	limit := l.limits[class]
	if limit.rate == 0 {
		return ctx, nil
	}
	key := l.prefix + "ratelimit:" + class.String() + ":" + p.KeyID
	q, err := l.buckets.take(ctx, key, limit)
	if err != nil {
		// Failing open: a broken cache must not take the API down with it.
		l.log.WarnContext(ctx, "rate limit failed; request let through unmetered",
			slog.String("request_id", RequestID(ctx)), slog.String("error", err.Error()))
		return ctx, nil
	}
	setRateLimitHeaders(header, q)
	charge := &rateCharge{limiter: l, key: key, limit: limit}
	if !q.allowed {
		l.metrics.rateLimited.WithLabelValues(class.String()).Inc()
		charge.denied = rateLimited(class, limit, q)
		if req.Method != http.MethodGet || req.Header.Get("If-None-Match") == "" {
			return ctx, charge.denied
		}
	}
	return context.WithValue(ctx, rateChargeKey{}, charge), nil
}

func rateLimited(class limitClass, limit bucketLimit, q quota) *problem.Error {
	retry := ceilSeconds(q.retryAfter)
	if retry < 1 {
		retry = 1
	}
	p := problem.New(problem.RateLimited, fmt.Sprintf(
		"This API key's %s budget is spent: %d requests per %s, bursts up to %d. Retry after %d s.",
		class, limit.rate, periodText(limit.period), limit.burst, retry))
	p.Header = http.Header{"Retry-After": {strconv.Itoa(retry)}}
	return p
}

func periodText(d time.Duration) string {
	if d == time.Second {
		return "second"
	}
	return d.String()
}

// settleNotModified gives back the token of a request answered 304.
func settleNotModified(ctx context.Context, header http.Header) {
	ch := rateChargeFrom(ctx)
	if ch == nil || ch.denied != nil {
		return // nothing was taken
	}
	// The answer is written after the request's own deadline is released: the refund must
	// still happen.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisTimeout)
	defer cancel()
	q, err := ch.limiter.buckets.refund(ctx, ch.key, ch.limit)
	if err != nil {
		ch.limiter.metrics.rateLimitErrors.Inc()
		return
	}
	setRateLimitHeaders(header, q)
}

// overdrawn is the 429 owed by a request that ran on an empty bucket only to learn whether
// its answer was a 304, or nil.
func overdrawn(ctx context.Context) *problem.Error {
	if ch := rateChargeFrom(ctx); ch != nil {
		return ch.denied
	}
	return nil
}

const (
	headerRateLimitLimit     = "RateLimit-Limit"
	headerRateLimitRemaining = "RateLimit-Remaining"
	headerRateLimitReset     = "RateLimit-Reset"
)

func setRateLimitHeaders(h http.Header, q quota) {
	h.Set(headerRateLimitLimit, strconv.Itoa(q.limit))
	h.Set(headerRateLimitRemaining, strconv.Itoa(q.remaining))
	h.Set(headerRateLimitReset, strconv.Itoa(ceilSeconds(q.reset)))
}

// The canonical forms of the headers an answer replaced by a 429 keeps (Header.Set stores
// "RateLimit-Limit" as "Ratelimit-Limit").
var (
	keepRequestID = http.CanonicalHeaderKey(headerRequestID)
	keepLimit     = http.CanonicalHeaderKey(headerRateLimitLimit)
	keepRemaining = http.CanonicalHeaderKey(headerRateLimitRemaining)
	keepReset     = http.CanonicalHeaderKey(headerRateLimitReset)
)

// keepOnlyRateLimitHeaders clears what a handler wrote, for an answer replaced by a 429.
func keepOnlyRateLimitHeaders(h http.Header) {
	for name := range h {
		switch http.CanonicalHeaderKey(name) {
		case keepRequestID, keepLimit, keepRemaining, keepReset:
		default:
			delete(h, name)
		}
	}
}

func ceilSeconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int(math.Ceil(d.Seconds()))
}

// ChargeRead takes one read from p's budget, for work that reaches the API without an HTTP
// request of its own: each operation a GraphQL socket starts. A spent budget is the 429
// problem; a failing rate-limit store lets the work through, as it does requests.
func (pl *Pipeline) ChargeRead(ctx context.Context, p auth.Principal) error {
	l := pl.limits
	if l == nil || l.limits[classRead].rate == 0 {
		return nil
	}
	limit := l.limits[classRead]
	key := l.prefix + "ratelimit:" + classRead.String() + ":" + p.KeyID
	q, err := l.buckets.take(ctx, key, limit)
	if err != nil {
		l.log.WarnContext(ctx, "rate limit failed; socket operation let through unmetered",
			slog.String("request_id", RequestID(ctx)), slog.String("error", err.Error()))
		return nil
	}
	if !q.allowed {
		l.metrics.rateLimited.WithLabelValues(classRead.String()).Inc()
		return rateLimited(classRead, limit, q)
	}
	return nil
}
