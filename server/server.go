// Package server is the HTTP face of Ride API: Echo wiring, the OpenAPI gate, the error
// boundary, and the strict-server implementation of openapi/ride.yaml over the store.
package server

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

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
	metrics *Metrics
	limits  *rateLimiter // nil when rate limits are off
	ready   atomic.Bool

	// Background workers run under workersCtx until Shutdown cancels it and waits.
	workersCtx  context.Context
	stopWorkers context.CancelFunc
	workers     sync.WaitGroup
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
	s := &Server{
		cfg:     cfg,
		store:   deps.Store,
		now:     func() time.Time { return deps.Now().UTC().Truncate(time.Microsecond) },
		log:     deps.Logger,
		cursors: ride.NewCursorCodec(cfg.CursorSecret),
	}
	docs, err := newPublishedDocuments()
	if err != nil {
		return nil, err
	}
	s.docs = docs
	g, err := newGate(newAuthenticator(deps.Store, s.now))
	if err != nil {
		return nil, err
	}
	var pool *sql.DB
	if db, err := deps.Store.DB().DB(); err == nil {
		pool = db
	}
	s.metrics = newMetrics(pool)
	if s.limits, err = newRateLimiter(cfg, s.log, s.metrics); err != nil {
		return nil, err
	}
	if s.limits != nil {
		g.limits = s.limits
	}
	s.workersCtx, s.stopWorkers = context.WithCancel(context.Background())
	s.SetReady(true)

	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.renderError
	e.Pre(s.observe)
	e.Pre(s.respond)
	e.Use(recoverPanics)
	e.Use(middleware.BodyLimit(fmt.Sprint(maxBodyBytes/1024/1024) + "M"))
	e.Use(g.middleware)
	gen.RegisterHandlers(e, gen.NewStrictHandler(s, nil))
	s.registerOutsideDocument(e)
	s.echo = e
	return s, nil
}

// ServeHTTP makes the server an http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// SetReady says whether the server takes traffic: GET /readyz answers 503 while it is false.
// A new Server is ready; main sets it false while migrations run, then true.
func (s *Server) SetReady(ready bool) {
	s.ready.Store(ready)
	if ready {
		s.metrics.ready.Set(1)
	} else {
		s.metrics.ready.Set(0)
	}
}

// Metrics are the server's Prometheus collectors, for code that counts events outside
// a request (the webhook worker).
func (s *Server) Metrics() *Metrics { return s.metrics }

// startWorker runs fn in the background until Shutdown; fn must return once its context is
// cancelled.
func (s *Server) startWorker(fn func(ctx context.Context)) {
	s.workers.Add(1)
	go func() {
		defer s.workers.Done()
		fn(s.workersCtx)
	}()
}

// Shutdown stops the background workers, waiting for them until ctx ends, and releases the
// server's own connections (Redis). Calling it again is harmless. Call it after http.Server.Shutdown has drained the
// requests in flight; the store belongs to the caller, who closes it last.
func (s *Server) Shutdown(ctx context.Context) error {
	s.SetReady(false)
	s.stopWorkers()
	done := make(chan struct{})
	go func() {
		s.workers.Wait()
		close(done)
	}()
	var errs []error
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("background workers still running: %w", ctx.Err()))
	}
	s.closeOnce.Do(func() {
		if s.limits != nil {
			errs = append(errs, s.limits.close())
		}
	})
	return errors.Join(errs...)
}

// recoverPanics turns a panic into a 500 through the error boundary, which logs it and tells
// the client nothing of it.
func recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		return next(c)
	}
}
