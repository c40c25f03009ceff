package pipeline

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rideapi/ride/server/auth"
)

// ObserveSocket names, for a socket whose key arrives in its first message (GraphQL's), the
// caller that key speaks for, in its log line like any request's. The gate let its upgrade
// through unauthenticated, and named its operation already.
func ObserveSocket(c echo.Context, p auth.Principal) {
	if s := stateOf(c.Request().Context()); s != nil {
		s.caller, s.authenticated = p, true
	}
}

// routeUnmatched labels requests that match no route, so that scanners probing random paths
// cannot grow the metrics without bound.
const routeUnmatched = "unmatched"

// statusRecorder remembers the status line of the answer as it goes out.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (r *statusRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *statusRecorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(p)
	r.bytes += n
	return n, err
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Observe wraps every request, outside respond, so that it sees the final answer (a 304, a
// rendered problem): it writes one structured log line and the request metrics. The line
// names the caller by key id and role, never by key.
func (pl *Pipeline) Observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		req := c.Request()
		method, path := req.Method, req.URL.Path // respond turns HEAD into GET
		rec := &statusRecorder{ResponseWriter: c.Response().Writer}
		c.Response().Writer = rec
		err := next(c)
		c.Response().Writer = rec.ResponseWriter
		elapsed := time.Since(start)

		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		// What the gate learnt is in the state of the request as the layers left it (Respond's
		// context, or the gate's when Respond is not among the layers).
		state := stateOf(c.Request().Context())
		route := routeUnmatched
		switch {
		case state != nil && state.operation != nil:
			route = state.operation.path
		case pl.outsideDocument[c.Path()]:
			route = c.Path()
		}
		pl.metrics.observeRequest(method, route, status, elapsed)

		var room [10]slog.Attr // every attribute below: the line's attributes need no allocation
		attrs := append(room[:0],
			slog.String("request_id", c.Response().Header().Get(headerRequestID)),
			slog.String("method", method),
			slog.String("route", route),
			slog.String("path", path),
			slog.Int("status", status),
			slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000),
			slog.Int("bytes", rec.bytes),
		)
		if state != nil && state.authenticated {
			attrs = append(attrs, slog.String("key_id", state.caller.KeyID), slog.String("role", state.caller.Role))
		}
		if req.Context().Err() != nil {
			// The client disconnected before the answer (nginx logs such a request as 499);
			// the request ran to its end all the same.
			attrs = append(attrs, slog.Bool("client_gone", true))
		}
		level := slog.LevelInfo
		switch {
		case status == http.StatusInternalServerError:
			level = slog.LevelError
		case status >= 500:
			level = slog.LevelWarn // not ready, or a dependency down: the readiness probe tells
		}
		// Straight to the handler, with no caller: Logger.LogAttrs would find the caller's
		// program counter on every request for a line whose message already says where it
		// comes from.
		if ctx := req.Context(); pl.log.Enabled(ctx, level) {
			r := slog.NewRecord(time.Now(), level, "request", 0)
			r.AddAttrs(attrs...)
			_ = pl.log.Handler().Handle(ctx, r)
		}
		return err
	}
}
