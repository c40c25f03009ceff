// Package server is the HTTP face of Ride API: Echo wiring, the OpenAPI gate, the error
// boundary, and the strict-server implementation of openapi/ride.yaml over the store.
package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	graphql "github.com/graph-gophers/graphql-go"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// maxBodyBytes is the request body limit of the contract (1 MiB).
const maxBodyBytes = 1 << 20

// Deps are the implementations the server runs on; main and the tests wire them.
type Deps struct {
	Store *store.Store
	// Now is the clock; tests pass a fake one.
	Now    func() time.Time
	Logger *slog.Logger
	// PaymentProvider charges payments; nil means the built-in SimulatedProvider.
	PaymentProvider PaymentProvider
	// Faults, when set, is called at named points of a request's work (see the fault*
	// constants) with the subject at hand, and a non-nil error (or a panic) fails the request
	// there. Only tests set it, to prove a failure half-way through leaves nothing behind.
	Faults func(ctx context.Context, point, subject string) error
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
	// estimateTTL is how long a fare estimate can be booked.
	estimateTTL time.Duration
	// graphql is schema/ride.graphql bound to its resolvers; persisted holds the registered
	// documents of automatic persisted queries.
	graphql   *graphql.Schema
	persisted *persistedQueries

	payments       PaymentProvider
	faults         func(ctx context.Context, point, subject string) error
	idempotencyTTL time.Duration
	executing      executingKeys

	// stop ends the background work New started (the idempotency purge); Close waits for it.
	stop       context.CancelFunc
	background sync.WaitGroup
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
	if deps.PaymentProvider == nil {
		deps.PaymentProvider = SimulatedProvider{}
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

		payments:       deps.PaymentProvider,
		faults:         deps.Faults,
		idempotencyTTL: cfg.IdempotencyTTL,
		estimateTTL:    cfg.EstimateTTL,
	}
	if s.estimateTTL <= 0 {
		s.estimateTTL = DefaultEstimateTTL
	}
	docs, err := newPublishedDocuments()
	if err != nil {
		return nil, err
	}
	s.docs = docs
	if s.graphql, err = newGraphQLSchema(s); err != nil {
		return nil, err
	}
	s.persisted = newPersistedQueries(s.now)
	g, err := newGate(newAuthenticator(deps.Store, s.now))
	if err != nil {
		return nil, err
	}

	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.renderError
	e.Pre(s.respond)
	e.Use(recoverPanics)
	e.Use(middleware.BodyLimit(fmt.Sprint(maxBodyBytes/1024/1024) + "M"))
	e.Use(g.middleware)
	// After the gate: only authenticated, valid requests reach the idempotency layer, so a
	// malformed request is never stored against its key.
	e.Use(s.idempotency)
	gen.RegisterHandlers(e, gen.NewStrictHandler(s, nil))
	s.echo = e

	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.background.Go(func() { s.purgeIdempotencyRecordsEvery(ctx, idempotencyPurgeInterval) })
	return s, nil
}

// Close stops the server's background work and waits for it to end. It does not close the
// store, which the caller owns; stop serving requests first.
func (s *Server) Close() error {
	s.stop()
	s.background.Wait()
	return nil
}

// ServeHTTP makes the server an http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// recoverPanics turns a panic into a 500 through the error boundary, which logs it and tells
// the client nothing of it.
func recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
			}
		}()
		return next(c)
	}
}
