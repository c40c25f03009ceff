// Package pipeline is the request pipeline around Ride API's handlers, every layer a request
// passes before and after its handler:
//
//   - observe: the request log line and the HTTP metrics (observe.go, metrics.go);
//   - respond: the request id and state, HEAD as GET, ETag and 304, and the answer's framing
//     (respond.go, request_id.go, buffered_response.go);
//   - the body limit and the byte-level checks of every input (request_input.go);
//   - the gate: route, authentication, rate limits, the query string, and validation against
//     openapi/ride.yaml (gate.go, ratelimit.go, query.go, validate.go; authentication itself
//     is package auth);
//   - idempotency: the Idempotency-Key layer and the request's transaction (idempotency.go,
//     tx.go);
//   - availability: 503 at once while a probe finds the database down (availability.go).
//
// The server composes the layers (Compose) around its Echo routes; errors from any layer or
// handler reach the one error boundary, Render (errors.go), which also answers Echo's own.
package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/store"
)

// Config is what the pipeline runs on.
type Config struct {
	Store   *store.Store
	Now     func() time.Time
	Log     *slog.Logger
	Metrics *Metrics
	Auth    *auth.Authenticator
	// RateLimits are the per-key budgets; the zero value turns rate limiting off.
	RateLimits RateLimits
	// IdempotencyTTL is how long an Idempotency-Key's answer is kept and replayed.
	IdempotencyTTL time.Duration
	// DatabaseTimeout bounds a request's wait for the database in all (see gate); zero means
	// store.DefaultReadTimeout.
	DatabaseTimeout time.Duration
	// OutsideDocument lists the Echo routes served beside openapi/ride.yaml (pages, metrics):
	// the gate lets them through unchecked and the request log names them as they are.
	OutsideDocument []string
	// Sockets are the OpenAPI paths whose GET requests may upgrade to a WebSocket that carries
	// its API key inside its own protocol (GraphQL's connection_init): the gate lets such an
	// upgrade through to its handler unauthenticated, after checking the upgrade itself.
	Sockets []string
	// Deprecated are paths kept under an old spelling: every answer on them, whatever it is,
	// carries Deprecation and a Link to the path's successor.
	Deprecated []DeprecatedPath
	// Stop ends the pipeline's background probes.
	Stop <-chan struct{}
	// SkipValidation leaves out the parameter and body checks (route, authentication and the
	// unknown-parameter check stay). Only the stack benchmark sets it, to measure what
	// validation costs.
	SkipValidation bool
}

// Pipeline holds the layers' shared state; its methods are the layers.
type Pipeline struct {
	store   *store.Store
	now     func() time.Time
	log     *slog.Logger
	metrics *Metrics

	gate            *gate
	limits          *rateLimiter // nil when rate limits are off
	outsideDocument map[string]bool
	deprecated      []DeprecatedPath
	idempotencyTTL  time.Duration
	executing       executingKeys
	// outage follows a database that stopped answering, so that it is logged once.
	outage *outage
}

// New builds the pipeline's layers.
func New(cfg Config) (*Pipeline, error) {
	if cfg.Store == nil || cfg.Auth == nil || cfg.Metrics == nil {
		return nil, errors.New("pipeline.New: Store, Auth and Metrics are required")
	}
	pl := &Pipeline{
		store: cfg.Store, now: cfg.Now, log: cfg.Log, metrics: cfg.Metrics,
		idempotencyTTL:  cfg.IdempotencyTTL,
		outsideDocument: map[string]bool{},
		outage: &outage{ping: cfg.Store.Ping, release: cfg.Store.FailIdempotencyRecord,
			log: cfg.Log, stop: cfg.Stop},
	}
	for _, route := range cfg.OutsideDocument {
		pl.outsideDocument[route] = true
	}
	pl.deprecated = cfg.Deprecated
	g, err := newGate(cfg.Auth, pl.outsideDocument)
	if err != nil {
		return nil, err
	}
	g.skipValidation = cfg.SkipValidation
	for _, path := range cfg.Sockets {
		g.sockets[path] = true
	}
	g.standbys = cfg.Store.Standbys()
	g.databaseTimeout = cfg.DatabaseTimeout
	if g.databaseTimeout <= 0 {
		g.databaseTimeout = store.DefaultReadTimeout
	}
	if pl.limits, err = newRateLimiter(cfg.RateLimits, cfg.Log, cfg.Metrics); err != nil {
		return nil, err
	}
	if pl.limits != nil {
		g.limits = pl.limits
	}
	pl.gate = g
	return pl, nil
}

// Gate is the layer that checks a request against openapi/ride.yaml (see gate).
func (pl *Pipeline) Gate(next echo.HandlerFunc) echo.HandlerFunc { return pl.gate.middleware(next) }

// ReportOutage tells the pipeline that the database failed a request as unreachable. That
// request alone is answered 503; the report has the database probed, and only a probe that
// gets no answer makes requests that need the database be answered 503 at once, until a
// later probe gets one.
func (pl *Pipeline) ReportOutage(ctx context.Context, err error) { pl.outage.report(ctx, err) }

// Close releases the pipeline's own connections (Redis).
func (pl *Pipeline) Close() error {
	if pl.limits != nil {
		return pl.limits.close()
	}
	return nil
}
