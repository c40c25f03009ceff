// Package server is the HTTP face of Ride API: Echo wiring, the OpenAPI gate, the error
// boundary, and the strict-server implementation of openapi/ride.yaml over the store.
package server

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
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
	// life runs the background work (webhook deliveries) between Start and Close.
	life lifecycle
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

	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.renderError
	e.Pre(s.respond)
	e.Use(recoverPanics)
	e.Use(middleware.BodyLimit(fmt.Sprint(maxBodyBytes/1024/1024) + "M"))
	e.Use(g.middleware)
	gen.RegisterHandlers(e, gen.NewStrictHandler(s, nil))
	s.echo = e

	worker, err := newWebhookWorker(cfg, deps)
	if err != nil {
		return nil, err
	}
	s.addTask("webhook deliveries", worker.Run)
	return s, nil
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
