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

// FailFastInOutage answers API requests 503 at once while the database is known to be away,
// instead of each waiting out the store's read timeout (store.DefaultReadTimeout); the
// outage's probe finds out when it is back.
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

// outage follows the database's unavailability as requests meet it: the first failure is
// logged and starts a probe, the others are counted silently, and when the probe gets an
// answer the recovery is logged and the idempotency keys that could not be released meanwhile
// are released.
type outage struct {
	store *store.Store
	log   *slog.Logger
	stop  <-chan struct{}

	mu       sync.Mutex
	down     bool
	since    time.Time
	failed   int
	releases []idempotencyRelease
}

// idempotencyRelease is a key whose request failed while the database was away.
type idempotencyRelease struct{ account, key, owner string }

func (o *outage) isDown() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.down
}

// report records a request that failed for want of the database.
func (o *outage) report(ctx context.Context, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failed++
	if o.down {
		return
	}
	o.down, o.since, o.failed = true, time.Now(), 1
	o.log.ErrorContext(ctx, "database unavailable; answering 503 until it is back",
		slog.String("request_id", RequestID(ctx)), slog.String("error", err.Error()))
	go o.probe()
}

// releaseLater keeps a key to release once the database answers again.
func (o *outage) releaseLater(account, key, owner string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.releases = append(o.releases, idempotencyRelease{account, key, owner})
	if !o.down {
		o.down, o.since = true, time.Now()
		go o.probe()
	}
}

func (o *outage) probe() {
	ticker := time.NewTicker(outageProbeEvery)
	defer ticker.Stop()
	for {
		select {
		case <-o.stop:
			return
		case <-ticker.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), ReadinessTimeout)
		err := o.store.Ping(ctx)
		cancel()
		if err != nil {
			continue
		}
		o.mu.Lock()
		releases, failed, since := o.releases, o.failed, o.since
		o.releases, o.down, o.failed = nil, false, 0
		o.mu.Unlock()
		for _, r := range releases {
			ctx, cancel := context.WithTimeout(context.Background(), store.DefaultReadTimeout)
			if err := o.store.FailIdempotencyRecord(ctx, r.account, r.key, r.owner); err != nil {
				o.log.Warn("release idempotency key after the outage", slog.String("error", err.Error()))
			}
			cancel()
		}
		o.log.Info("database answers again", slog.Duration("outage", time.Since(since).Round(time.Millisecond)),
			slog.Int("requests_answered_503", failed), slog.Int("idempotency_keys_released", len(releases)))
		return
	}
}
