package pipeline

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rideapi/ride/server/problem"
	"github.com/rideapi/ride/store"
)

// unavailableRetryAfter is the Retry-After of a 503 unavailable, in seconds.
const unavailableRetryAfter = "5"

// ReadinessTimeout bounds the database ping of /readyz: probes expect an answer within a
// second whatever the database does.
const ReadinessTimeout = 800 * time.Millisecond

// outageProbeEvery is how often a server whose database went away checks that it is back.
const outageProbeEvery = 500 * time.Millisecond

// FailFastInOutage answers API requests 503 at once while the database is known to be away
// (a probe found it so), instead of each waiting out the store's bound; the probe finds out
// when it is back.
func (pl *Pipeline) FailFastInOutage(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if pl.outage.isDown() && needsDatabase(c.Request().URL.Path) {
			return Unavailable(nil)
		}
		return next(c)
	}
}

// needsDatabase tells the API's routes from the published documents and probes, which answer
// without it (/readyz pings it itself).
func needsDatabase(path string) bool {
	return strings.HasPrefix(path, "/v1/") && !strings.HasPrefix(path, "/v1/openapi.")
}

// Unavailable is the answer to a request the database could not serve; err is nil
// when the request was not even tried because the database is known to be away.
func Unavailable(err error) *problem.Error {
	p := problem.New(problem.Unavailable,
		"The database is unreachable or not answering. Retry after the Retry-After delay; an Idempotency-Key of this request is free to reuse.")
	p.Header = http.Header{"Retry-After": {unavailableRetryAfter}}
	p.Err = err
	return p
}

// outage follows the database's availability as requests meet it. A request that fails for
// want of the database is answered 503 alone: one connection reset, or one statement that
// waited too long, says nothing of the others. It starts a probe, which pings the database on
// a connection of its own (store.Ping); only when the probe gets no answer is the database
// declared away, and API requests are answered 503 at once until a later probe gets one. A
// client's broken bytes never come here: they are that request's own 4xx (bodyReadProblem).
//
// The first failure of a check is logged as a warning, a declared outage once as an error
// when it starts and once when it ends; the idempotency keys that could not be released
// meanwhile are released when the database answers (at its next answer if it goes away
// again first).
type outage struct {
	ping    func(ctx context.Context) error                             // the store's Ping
	release func(ctx context.Context, account, key, owner string) error // FailIdempotencyRecord
	log     *slog.Logger
	stop    <-chan struct{}

	mu sync.Mutex
	// probing is true while a probe runs: checking a failure, or waiting out an outage.
	probing bool
	// down is true once a probe failed, until one succeeds: requests get 503 at once.
	down     bool
	since    time.Time
	failed   int // requests answered 503 for want of the database since the probe started
	releases []idempotencyRelease
}

// idempotencyRelease is a key whose request failed while the database was away.
type idempotencyRelease struct{ account, key, owner string }

func (o *outage) isDown() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.down
}

// report records a request that failed for want of the database, and has the database
// probed unless a probe runs already.
func (o *outage) report(ctx context.Context, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failed++
	if o.probing {
		return
	}
	o.probing, o.since, o.failed = true, time.Now(), 1
	o.log.WarnContext(ctx, "a request could not reach the database; probing it",
		slog.String("request_id", RequestID(ctx)), slog.String("error", err.Error()))
	go o.probe()
}

// releaseLater keeps a key to release once the database answers, and has it probed.
func (o *outage) releaseLater(account, key, owner string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.releases = append(o.releases, idempotencyRelease{account, key, owner})
	if !o.probing {
		o.probing, o.since, o.failed = true, time.Now(), 0
		go o.probe()
	}
}

// probe pings the database at once and, while it gets no answer, every outageProbeEvery:
// the first failed ping declares the outage. The first answer ends the probe (and the
// outage), and releases the keys kept meanwhile.
func (o *outage) probe() {
	declared := false
	for {
		ctx, cancel := context.WithTimeout(context.Background(), ReadinessTimeout)
		err := o.ping(ctx)
		cancel()
		if err == nil {
			break
		}
		if !declared {
			declared = true
			o.mu.Lock()
			o.down = true
			o.mu.Unlock()
			o.log.Error("database unavailable; answering 503 until it is back", slog.String("error", err.Error()))
		}
		select {
		case <-o.stop:
			return
		case <-time.After(outageProbeEvery):
		}
	}
	o.mu.Lock()
	releases, failed, since := o.releases, o.failed, o.since
	o.releases, o.probing, o.down, o.failed = nil, false, false, 0
	o.mu.Unlock()
	var again []idempotencyRelease
	for _, r := range releases {
		ctx, cancel := context.WithTimeout(context.Background(), store.DefaultReadTimeout)
		err := o.release(ctx, r.account, r.key, r.owner)
		cancel()
		switch {
		case err == nil:
		case store.Unavailable(err):
			// Away again before the key was released: the 503 its request got said the key
			// is free, so it must not wait for its lease to end. Released at the next answer.
			again = append(again, r)
		default:
			o.log.Warn("release idempotency key after the outage", slog.String("error", err.Error()))
		}
	}
	if declared {
		o.log.Info("database answers again", slog.Duration("outage", time.Since(since).Round(time.Millisecond)),
			slog.Int("requests_answered_503", failed), slog.Int("idempotency_keys_released", len(releases)-len(again)))
	}
	if len(again) == 0 {
		return
	}
	o.log.Warn("the database went away again while idempotency keys were released; releasing them at its next answer",
		slog.Int("idempotency_keys", len(again)))
	select {
	case <-o.stop:
		return
	case <-time.After(outageProbeEvery):
	}
	for _, r := range again {
		o.releaseLater(r.account, r.key, r.owner)
	}
}
