package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/app"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/pipeline"
	"github.com/rideapi/ride/store"
)

// The per-request middleware stack, measured with and without each layer (the handler's own
// work is the same in every variant, so the differences are the layers). The requests that
// reach the database run on SQLite, or on PostgreSQL with TEST_DATABASE_URL:
//
//	go test -run XXX -bench Stack -benchmem ./server/
//	TEST_DATABASE_URL=postgres://… go test -run XXX -bench Stack -benchmem ./server/
//
// stackLayers picks the layers of benchStack; it mirrors the wiring of New.
type stackLayers struct {
	observe     bool // request log line and metrics
	respond     bool // request id, ETag and 304, error rendering of the outermost layer
	gate        bool // route finding, authentication, unknown-parameter check
	validate    bool // parameter and body validation (inside the gate)
	idempotency bool // the Idempotency-Key layer
}

var allLayers = stackLayers{observe: true, respond: true, gate: true, validate: true, idempotency: true}

type benchFixture struct {
	s      *Server
	st     *store.Store
	admin  string
	tripID string
	trip   gen.Trip // the trip's public view
}

func newBenchFixture(b *testing.B) *benchFixture {
	b.Helper()
	ctx := context.Background()
	s, st := benchServer(b, benchDatabaseURL(b, os.Getenv("TEST_DATABASE_URL") != ""), true)
	admin, _, err := app.NewAPIKey(ctx, st, app.APIKeyParams{Role: auth.RoleAdmin, Account: auth.DefaultAccount}, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	page, err := st.ListTrips(ctx, store.TripListParams{Limit: 1, Filter: store.TripFilter{Account: auth.DefaultAccount}})
	if err != nil || len(page.Trips) == 0 {
		b.Fatal("no demo trip", err)
	}
	return &benchFixture{s: s, st: st, admin: admin, tripID: page.Trips[0].ID, trip: tripView(page.Trips[0], nil, auth.Principal{Role: auth.RoleAdmin, Account: auth.DefaultAccount})}
}

// stack builds the chosen layers around the real handlers, composed as New composes them.
// Without the gate, a stand-in names the caller (an admin), as the handlers need one.
func (f *benchFixture) stack(b *testing.B, l stackLayers) http.Handler {
	b.Helper()
	s := f.s
	p, err := pipeline.New(pipeline.Config{
		Store: f.st, Now: s.now, Log: s.log, Metrics: pipeline.NewMetrics(nil),
		Auth:           auth.New(f.st, s.now, pipeline.NewMetrics(nil).Auth),
		IdempotencyTTL: s.cfg.IdempotencyTTL, OutsideDocument: routesOutsideDocument,
		SkipValidation: !l.validate,
	})
	if err != nil {
		b.Fatal(err)
	}
	e := echo.New()
	e.HTTPErrorHandler = p.Render
	var pre []echo.MiddlewareFunc
	if l.observe {
		pre = append(pre, p.Observe)
	}
	if l.respond {
		pre = append(pre, p.Respond)
	}
	use := []echo.MiddlewareFunc{pipeline.RecoverPanics, p.FailFastInOutage, pipeline.LimitBody}
	if l.gate {
		use = append(use, p.Gate)
	} else {
		admin := auth.Principal{KeyID: "key_bench", Role: auth.RoleAdmin, Account: auth.DefaultAccount}
		use = append(use, func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error {
				c.SetRequest(c.Request().WithContext(auth.WithPrincipal(c.Request().Context(), admin)))
				return next(c)
			}
		})
	}
	if l.idempotency {
		use = append(use, p.Idempotency)
	}
	gen.RegisterHandlers(e, gen.NewStrictHandler(cannedTrip{Server: s, trip: f.trip}, nil))
	return pipeline.Compose(e, pre, use) // as New composes the real server
}

// cannedTrip answers GET /v1/trips/{id} with a trip loaded once, so that the layers'
// differences are not lost in SQLite's time; every other operation is the real one.
type cannedTrip struct {
	*Server
	trip gen.Trip
}

func (c cannedTrip) GetTrip(ctx context.Context, req gen.GetTripRequestObject) (gen.GetTripResponseObject, error) {
	if auth.PrincipalFrom(ctx).Role == "" {
		return nil, app.Forbidden("no caller")
	}
	return jsonAnswer[gen.Trip]{body: c.trip}, nil
}

func (f *benchFixture) serve(b *testing.B, h http.Handler, method, path, body string, header http.Header, want int) {
	b.Helper()
	var r io.Reader = http.NoBody
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	req.Header.Set("Authorization", "Bearer "+f.admin)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != want {
		b.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body.String())
	}
}

// BenchmarkStackGetTrip is GET /v1/trips/{id} through the real server (its database included), then
// through the stack with a canned trip instead of the database: all layers, without each
// layer in turn, and the handler alone.
func BenchmarkStackGetTrip(b *testing.B) {
	f := newBenchFixture(b)
	path := "/v1/trips/" + f.tripID
	variants := []struct {
		name   string
		layers stackLayers
	}{
		{"all", allLayers},
		{"without_observe", stackLayers{respond: true, gate: true, validate: true, idempotency: true}},
		{"without_respond_etag", stackLayers{observe: true, gate: true, validate: true, idempotency: true}},
		{"without_validation", stackLayers{observe: true, respond: true, gate: true, idempotency: true}},
		{"without_gate", stackLayers{observe: true, respond: true, idempotency: true}},
		{"without_idempotency", stackLayers{observe: true, respond: true, gate: true, validate: true}},
		{"handler_only", stackLayers{}},
	}
	b.Run("server_ServeHTTP", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			f.serve(b, f.s, http.MethodGet, path, "", nil, http.StatusOK)
		}
	})
	for _, v := range variants {
		h := f.stack(b, v.layers)
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				f.serve(b, h, http.MethodGet, path, "", nil, http.StatusOK)
			}
		})
	}
}

// BenchmarkStackNotModified is a conditional GET answered 304 from the ETag.
func BenchmarkStackNotModified(b *testing.B) {
	f := newBenchFixture(b)
	path := "/v1/trips/" + f.tripID
	req := httptest.NewRequest(http.MethodGet, path, http.NoBody)
	req.Header.Set("Authorization", "Bearer "+f.admin)
	w := httptest.NewRecorder()
	f.s.ServeHTTP(w, req)
	etag := http.Header{"If-None-Match": {w.Header().Get("ETag")}}
	b.ReportAllocs()
	for b.Loop() {
		f.serve(b, f.s, http.MethodGet, path, "", etag, http.StatusNotModified)
	}
}

// BenchmarkStackErrorRendering answers 404 problem+json for an absent trip (no database
// work: the id is checked first) and 400 for an unknown query parameter.
func BenchmarkStackErrorRendering(b *testing.B) {
	f := newBenchFixture(b)
	b.Run("404_absent_trip", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			f.serve(b, f.s, http.MethodGet, "/v1/trips/trp_nosuchtrip", "", nil, http.StatusNotFound)
		}
	})
	b.Run("400_unknown_parameter", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			f.serve(b, f.s, http.MethodGet, "/v1/trips?colour=red", "", nil, http.StatusBadRequest)
		}
	})
	b.Run("401_no_key", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			req := httptest.NewRequest(http.MethodGet, "/v1/trips", http.NoBody)
			w := httptest.NewRecorder()
			f.s.ServeHTTP(w, req)
			if w.Code != http.StatusUnauthorized {
				b.Fatal(w.Code)
			}
		}
	})
}

// BenchmarkStackIdempotencyReplay is POST /v1/fare-estimates repeated with one
// Idempotency-Key: the key lookup and the stored answer's replay, without the effect.
func BenchmarkStackIdempotencyReplay(b *testing.B) {
	f := newBenchFixture(b)
	cities, err := f.st.Cities(context.Background())
	if err != nil || len(cities) == 0 {
		b.Fatal("no city", err)
	}
	city := cities[0] // the first by slug
	body := `{"origin":{"lat":` + ftoa(city.CenterLat) + `,"lng":` + ftoa(city.CenterLng) + `},` +
		`"destination":{"lat":` + ftoa(city.CenterLat+0.01) + `,"lng":` + ftoa(city.CenterLng+0.01) + `},"ride_type":"economy"}`
	key := http.Header{"Idempotency-Key": {"bench-replay-key"}}
	f.serve(b, f.s, http.MethodPost, "/v1/fare-estimates", body, key, http.StatusCreated)
	b.ReportAllocs()
	for b.Loop() {
		f.serve(b, f.s, http.MethodPost, "/v1/fare-estimates", body, key, http.StatusCreated)
	}
}

func ftoa(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// BenchmarkStackListTrips is a first page of 20 trips through the real server on SQLite.
func BenchmarkStackListTrips(b *testing.B) {
	f := newBenchFixture(b)
	b.ReportAllocs()
	for b.Loop() {
		f.serve(b, f.s, http.MethodGet, "/v1/trips?limit=20", "", nil, http.StatusOK)
	}
}
