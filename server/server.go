// Package server is the HTTP face of Ride API: its construction (New) and the strict-server
// implementation of openapi/ride.yaml, one file per resource, each handler a translation of
// the generated request into a call of package app (the rules) and of its result into the
// generated answer. The layers around the handlers, the error boundary included, are package
// pipeline; who calls is package auth; the error catalogue is package problem.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/app"
	"github.com/rideapi/ride/server/auth"
	graphqlapi "github.com/rideapi/ride/server/graphql"
	"github.com/rideapi/ride/server/pipeline"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/webhooks/delivery"
)

// Deps are the implementations the server runs on; main and the tests wire them.
type Deps struct {
	Store *store.Store
	// Now is the clock; tests pass a fake one.
	Now    func() time.Time
	Logger *slog.Logger
	// PaymentProvider charges payments; nil means the built-in app.SimulatedProvider.
	PaymentProvider app.PaymentProvider
	// Faults, when set, is called at named points of a request's work (see the fault*
	// constants) with the subject at hand, and a non-nil error (or a panic) fails the request
	// there. Only tests set it, to prove a failure half-way through leaves nothing behind.
	Faults func(ctx context.Context, point, subject string) error
	// Starting makes New return a server that is not ready yet: GET /readyz answers 503 and
	// background workers wait until SetReady(true). main sets it while migrations run.
	Starting bool
}

// Server implements every operation of openapi/ride.yaml.
type Server struct {
	cfg     Config
	store   *store.Store
	now     func() time.Time
	log     *slog.Logger
	cursors *ride.CursorCodec
	docs    *publishedDocuments
	echo    *echo.Echo
	handler http.Handler // echo's routes inside the request pipeline
	metrics *pipeline.Metrics
	auth    *auth.Authenticator
	// pipeline holds the layers around the handlers: gate, rate limits, idempotency...
	pipeline *pipeline.Pipeline
	ready    atomic.Bool
	// estimateTTL is how long a fare estimate can be booked.
	estimateTTL time.Duration
	// graphql runs /v1/graphql: schema/ride.graphql bound to its resolvers.
	graphql *graphqlapi.Handler

	// app is what the service does, whoever asks: REST's handlers here translate to it.
	app *app.App
	// webhookClient sends the delivery worker's attempts and the test events, with the same
	// guards against private addresses.
	webhookClient *http.Client
	// live hands trip updates to the streams that follow them.
	live *liveHub
	// liveHeartbeat is how often an idle trip stream sends a comment.
	liveHeartbeat time.Duration

	// Background workers (the idempotency purge) run under backgroundCtx until stop cancels
	// it; Shutdown and Close wait for them. They start when the server is first ready, so
	// that none touches a database whose migrations are still running.
	backgroundCtx context.Context
	stop          context.CancelFunc
	// Streams and sockets run until sessionsCtx ends: at EndSessions, or with backgroundCtx.
	sessionsCtx context.Context
	endSessions context.CancelFunc
	background  sync.WaitGroup
	workersMu   sync.Mutex
	workers     []func(ctx context.Context) // registered, not yet started
	workersOn   bool
	closeOnce   sync.Once
}

var _ gen.StrictServerInterface = (*Server)(nil)

// New wires the server. It does not listen; serve its Handler.
func New(cfg Config, deps Deps) (*Server, error) {
	if deps.Store == nil {
		return nil, fmt.Errorf("server.New: a store is required")
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if cfg.IdempotencyTTL == 0 {
		cfg.IdempotencyTTL = DefaultIdempotencyTTL
	}
	s := &Server{
		cfg:     cfg,
		store:   deps.Store,
		now:     func() time.Time { return deps.Now().UTC().Truncate(time.Microsecond) },
		log:     deps.Logger,
		cursors: ride.NewCursorCodec(cfg.CursorSecret),

		webhookClient: delivery.NewClient(delivery.ClientOptions{Insecure: cfg.WebhookInsecure, Timeout: cfg.WebhookTimeout}),
		estimateTTL:   cfg.EstimateTTL,
		liveHeartbeat: cfg.LiveHeartbeat,
	}
	if s.liveHeartbeat <= 0 {
		s.liveHeartbeat = DefaultLiveHeartbeat
	}
	if s.estimateTTL <= 0 {
		s.estimateTTL = DefaultEstimateTTL
	}
	s.app = app.New(app.Config{
		Store: deps.Store, Now: s.now, Payments: deps.PaymentProvider, EstimateTTL: s.estimateTTL,
		TripChanged: publishTripUpdate, Faults: deps.Faults,
	})
	docs, err := newPublishedDocuments()
	if err != nil {
		return nil, err
	}
	s.docs = docs
	s.graphql, err = graphqlapi.New(graphqlapi.Config{
		Host: graphQLHost{s}, Logger: deps.Logger, Now: s.now, InitTimeout: cfg.GraphQLInitTimeout,
	})
	if err != nil {
		return nil, err
	}
	s.metrics = pipeline.NewMetrics(deps.Store.Pool())
	s.auth = auth.New(deps.Store, s.now, s.metrics.Auth)
	s.auth.LimitSessions(cfg.MaxSessions)
	s.backgroundCtx, s.stop = context.WithCancel(context.Background())
	s.sessionsCtx, s.endSessions = context.WithCancel(s.backgroundCtx)
	s.pipeline, err = pipeline.New(pipeline.Config{
		Store: deps.Store, Now: s.now, Log: deps.Logger, Metrics: s.metrics, Auth: s.auth,
		RateLimits: pipeline.RateLimits{
			Read: cfg.RateLimitRead, Write: cfg.RateLimitWrite, Period: cfg.RateLimitPeriod,
			RedisURL: cfg.RedisURL, KeyPrefix: cfg.RateLimitKeyPrefix,
		},
		IdempotencyTTL:  cfg.IdempotencyTTL,
		DatabaseTimeout: cfg.databaseTimeout(),
		OutsideDocument: routesOutsideDocument,
		Sockets:         []string{"/v1/graphql"},
		Deprecated:      []pipeline.DeprecatedPath{webhookEndpointsAliasPath},
		Stop:            s.backgroundCtx.Done(),
	})
	if err != nil {
		return nil, err
	}
	s.startWorker(func(ctx context.Context) {
		s.pipeline.PurgeIdempotencyRecordsEvery(ctx, pipeline.IdempotencyPurgeInterval)
	})
	// The revocation watch runs from the start, ready or not: a replica that serves requests
	// must refuse revoked keys, and its reads fail harmlessly while migrations run.
	s.background.Go(func() { s.auth.Watch(s.backgroundCtx) })
	// Trip updates are followed from the start too: streams are answered as soon as requests
	// are, and the follower's reads fail harmlessly while migrations run.
	s.live = newLiveHub(deps.Logger)
	s.background.Go(func() { s.live.run(s.backgroundCtx, deps.Store) })
	s.SetReady(!deps.Starting)

	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.pipeline.Render
	gen.RegisterHandlersWithOptions(e, gen.NewStrictHandler(s, nil), gen.RegisterHandlersOptions{
		// A WebSocket upgrade of GET /v1/graphql is a subscriptions socket, not a query.
		OperationMiddlewares: map[string][]echo.MiddlewareFunc{"queryGraphQL": {s.graphQLSockets}},
	})
	s.registerOutsideDocument(e)
	s.echo = e
	// Pre-routing layers see unmatched paths too, and Respond routes HEAD as GET.
	p := s.pipeline
	s.handler = pipeline.Compose(e, []echo.MiddlewareFunc{p.Observe, p.Respond}, []echo.MiddlewareFunc{
		pipeline.RecoverPanics,
		p.FailFastInOutage,
		pipeline.LimitBody,
		p.Gate,
		// After the gate: only authenticated, valid requests reach the idempotency layer, so
		// a malformed request is never stored against its key.
		p.Idempotency,
	})

	worker, err := newWebhookWorker(cfg, deps, s.webhookClient, s.metrics)
	if err != nil {
		return nil, err
	}
	s.startWorker(func(ctx context.Context) {
		if err := worker.Run(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("webhook delivery worker stopped", "error", err)
		}
	})
	return s, nil
}

// Close stops the server's background work and waits for it to end: Shutdown without a
// deadline. It does not close the store, which the caller owns; stop serving requests first.
func (s *Server) Close() error {
	return s.Shutdown(context.Background())
}

// ServeHTTP makes the server an http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// SetReady says whether the server takes traffic: GET /readyz answers 503 while it is false.
// A new Server is ready unless Deps.Starting; the first SetReady(true) starts the background
// workers.
func (s *Server) SetReady(ready bool) {
	s.ready.Store(ready)
	if !ready {
		s.metrics.SetReady(false)
		return
	}
	s.metrics.SetReady(true)
	s.workersMu.Lock()
	defer s.workersMu.Unlock()
	if !s.workersOn && s.backgroundCtx.Err() == nil {
		s.workersOn = true
		for _, fn := range s.workers {
			s.background.Go(func() { fn(s.backgroundCtx) })
		}
		s.workers = nil
	}
}

// Metrics are the server's Prometheus collectors, for code that counts events outside
// a request (the webhook worker).
func (s *Server) Metrics() *pipeline.Metrics { return s.metrics }

// startWorker runs fn in the background, from the moment the server is ready until Shutdown
// or Close; fn must return once its context is cancelled.
func (s *Server) startWorker(fn func(ctx context.Context)) {
	s.workersMu.Lock()
	defer s.workersMu.Unlock()
	if !s.workersOn {
		s.workers = append(s.workers, fn)
		return
	}
	s.background.Go(func() { fn(s.backgroundCtx) })
}

// EndSessions ends the trip streams and GraphQL sockets open on the server, which would
// otherwise hold a drain until its deadline: a stream ends, for its client to reconnect
// (EventSource does) to a replica that serves; a socket closes with 1001, going away. Call it
// once the server stops taking connections, before waiting for the requests in flight.
func (s *Server) EndSessions() { s.endSessions() }

// Shutdown stops the background workers, waiting for them until ctx ends, and releases the
// server's own connections (Redis). Calling it again is harmless. Call it after
// http.Server.Shutdown has drained the requests in flight; the store belongs to the caller,
// who closes it last.
func (s *Server) Shutdown(ctx context.Context) error {
	s.SetReady(false)
	s.workersMu.Lock()
	s.stop() // under the lock: no worker starts after this
	s.workersMu.Unlock()
	done := make(chan struct{})
	go func() {
		s.background.Wait()
		close(done)
	}()
	var errs []error
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("background workers still running: %w", ctx.Err()))
	}
	s.closeOnce.Do(func() {
		errs = append(errs, s.pipeline.Close())
	})
	return errors.Join(errs...)
}
