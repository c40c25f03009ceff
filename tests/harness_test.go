package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rideapi/ride/server/app"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/store/storetest"
)

// Harness is one running server on one engine, shared by the specs of that engine. Specs
// isolate themselves by creating their own cities, drivers and riders.
type Harness struct {
	Engine string
	URL    string
	Store  *store.Store
	// Admin is an admin key of the default account.
	Admin string
	// DatabaseURL names the harness's database, for more servers on it.
	DatabaseURL string

	httpServer *httptest.Server
	server     *server.Server
	closeDB    func()

	// faults and provider let a spec fail or replace parts of a request's work; see
	// payments_test.go. Both are nil between specs.
	faults   atomic.Pointer[FaultFunc]
	provider atomic.Pointer[app.PaymentProvider]
}

var (
	harnesses = map[string]*Harness{}
	validator struct {
		doc    *openapi3.T
		router routers.Router
	}
)

// engineNames is known when the spec tree is built, before BeforeSuite runs.
func engineNames() []string {
	names := []string{"sqlite"}
	if os.Getenv("TEST_DATABASE_URL") != "" {
		names = append(names, "postgres")
	}
	return names
}

// harnessFor returns the engine's harness, made on first use: spec files declare their trees
// while package variables initialise, before any init function runs.
func harnessFor(name string) *Harness {
	if harnesses[name] == nil {
		harnesses[name] = &Harness{Engine: name}
	}
	return harnesses[name]
}

// ForEachEngine declares the same specs once per engine.
func ForEachEngine(text string, body func(h *Harness)) bool {
	for _, name := range engineNames() {
		h := harnessFor(name)
		Describe(text+" ["+name+"]", Label(name), func() { body(h) })
	}
	return true
}

var _ = BeforeSuite(func(ctx SpecContext) {
	// Without a server the PostgreSQL specs are not even declared: in CI that is a failure.
	if os.Getenv("CI") != "" && os.Getenv("TEST_DATABASE_URL") == "" {
		Fail("CI must run the PostgreSQL specs, but TEST_DATABASE_URL is unset (.ci/run sets it)")
	}
	doc, err := gen.GetSwagger()
	Expect(err).NotTo(HaveOccurred())
	doc.Servers = nil
	closeObjects(doc)
	validator.doc = doc
	validator.router, err = gorillamux.NewRouter(doc)
	Expect(err).NotTo(HaveOccurred())
	// The document declares /v1/openapi.yaml a string, as every client receives it; kin-openapi
	// would otherwise parse YAML bodies into objects before checking them.
	openapi3filter.RegisterBodyDecoder("application/yaml", func(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		text, err := io.ReadAll(body)
		return string(text), err
	})
	// A trip stream is text; its messages are checked one by one against TripLiveUpdate
	// (FollowTrip).
	openapi3filter.RegisterBodyDecoder("text/event-stream", func(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		text, err := io.ReadAll(body)
		return string(text), err
	})

	for name, h := range harnesses {
		var url string
		switch name {
		case "sqlite":
			url = "sqlite://" + filepath.Join(GinkgoT().TempDir(), "ride.db")
		case "postgres":
			// CI sets TEST_DATABASE_URL: an unreachable server fails the suite, never skips it.
			var err error
			url, h.closeDB, err = storetest.NewPostgresDatabase(ctx, os.Getenv("TEST_DATABASE_URL"))
			Expect(err).NotTo(HaveOccurred())
		}
		h.start(ctx, url)
	}
}, NodeTimeout(2*time.Minute))

var _ = AfterSuite(func() {
	for _, h := range harnesses {
		if h.httpServer != nil {
			h.httpServer.Close()
		}
		if h.server != nil {
			_ = h.server.Close()
		}
		if h.Store != nil {
			_ = h.Store.Close()
		}
		if h.closeDB != nil {
			h.closeDB()
		}
	}
})

func (h *Harness) start(ctx context.Context, url string) {
	// The delivery worker runs for the whole suite: a spec that registers an endpoint and
	// writes an event (directly or through any operation) sees it delivered.
	h.startWith(ctx, url, testConfig(), true)
}

// startWith opens the database at url and serves it with cfg, running the background work
// (the webhook delivery worker) when startWorker.
func (h *Harness) startWith(ctx context.Context, url string, cfg server.Config, startWorker bool) {
	st, err := store.Open(ctx, url)
	Expect(err).NotTo(HaveOccurred(), "open %s store", h.Engine)
	Expect(st.Migrate(ctx)).To(Succeed())
	h.Store = st
	h.DatabaseURL = url
	if harnesses[h.Engine] == h {
		h.installQueryLog() // before its server runs statements
	}
	h.server = h.newServerWith(cfg, nil, startWorker)
	h.httpServer = httptest.NewServer(h.server)
	h.URL = h.httpServer.URL
	h.Admin = h.Key(auth.RoleAdmin, "")
}

// newServerWith builds a server on the harness's store; now is its clock (nil: the real one).
// Faults and the payment provider stay switchable by the spec through the harness. Without
// workers the server holds its background work (the webhook delivery worker, purges) as a
// server still migrating does, so that one database has one worker unless a spec wants two.
func (h *Harness) newServerWith(cfg server.Config, now func() time.Time, workers bool) *server.Server {
	srv, err := server.New(cfg, server.Deps{
		Store: h.Store, Now: now, Logger: testLogger(), Faults: h.fault, PaymentProvider: switchableProvider{h},
		Starting: !workers,
	})
	Expect(err).NotTo(HaveOccurred())
	return srv
}

// WithClock is a harness for the current spec whose server, on the same database, reads the
// time from now: specs that need time to pass (estimate expiry) move a FakeClock instead of
// sleeping. The server stops when the spec ends.
func (h *Harness) WithClock(now func() time.Time) *Harness {
	clocked := &Harness{Engine: h.Engine, Store: h.Store, Admin: h.Admin}
	clocked.server = clocked.newServerWith(testConfig(), now, false)
	clocked.httpServer = httptest.NewServer(clocked.server)
	DeferCleanup(clocked.server.Close)
	DeferCleanup(clocked.httpServer.Close)
	clocked.URL = clocked.httpServer.URL
	return clocked
}

// FakeClock is a clock that moves only when told; safe for concurrent use.
type FakeClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewFakeClock starts a clock at t.
func NewFakeClock(t time.Time) *FakeClock { return &FakeClock{now: t} }

// Now tells the clock's time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// testConfig is the configuration of every test server: webhooks may call receivers on
// 127.0.0.1 over plain http, and retry on a second-scale schedule within a minute.
func testConfig() server.Config {
	return server.Config{
		CursorSecret:         []byte("test-cursor-secret-0123456789"),
		WebhookInsecure:      true,
		WebhookRetrySchedule: []time.Duration{time.Second, 2 * time.Second},
		WebhookHorizon:       time.Minute,
		WebhookTimeout:       2 * time.Second,
	}
}

// testDefaults fills what a spec's own configuration leaves zero with the suite's settings.
// Every server on a shared test database runs a delivery worker, so each must deliver as the
// harness's does: one with production settings would claim deliveries to receivers on
// 127.0.0.1 and refuse them. A spec that wants other webhook settings starts from
// testConfig() and changes them.
func testDefaults(cfg server.Config) server.Config {
	base := testConfig()
	if cfg.CursorSecret == nil {
		cfg.CursorSecret = base.CursorSecret
	}
	if cfg.WebhookRetrySchedule == nil {
		cfg.WebhookInsecure = base.WebhookInsecure
		cfg.WebhookRetrySchedule = base.WebhookRetrySchedule
		cfg.WebhookHorizon = base.WebhookHorizon
		cfg.WebhookTimeout = base.WebhookTimeout
	}
	return cfg
}

func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(GinkgoWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// Key creates an API key of the default account.
func (h *Harness) Key(role, subject string) string {
	return h.KeyIn(role, subject, auth.DefaultAccount)
}

// KeyIn creates an API key of the given account.
func (h *Harness) KeyIn(role, subject, account string) string {
	secret, _, err := app.NewAPIKey(context.Background(), h.Store,
		app.APIKeyParams{Role: role, Subject: subject, Account: account}, time.Now())
	Expect(err).NotTo(HaveOccurred())
	return secret
}

// Response is an answer the harness has already validated against the document.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a generic value, for assertions on exact members.
func (r *Response) JSON() map[string]any {
	var v map[string]any
	ExpectWithOffset(1, json.Unmarshal(r.Body, &v)).To(Succeed(), "body: %s", r.Body)
	return v
}

// Decode decodes the body into v.
func (r *Response) Decode(v any) {
	ExpectWithOffset(1, json.Unmarshal(r.Body, v)).To(Succeed(), "body: %s", r.Body)
}

// Problem decodes a problem+json body.
func (r *Response) Problem() gen.Problem {
	ExpectWithOffset(1, r.Header.Get("Content-Type")).To(Equal("application/problem+json"), "body: %s", r.Body)
	var p gen.Problem
	ExpectWithOffset(1, json.Unmarshal(r.Body, &p)).To(Succeed())
	return p
}

// Request is one call; zero fields are left out.
type Request struct {
	Method string
	Path   string
	Key    string
	Body   any // encoded as JSON unless []byte or string
	Header map[string]string
}

// GET calls path with a key.
func (h *Harness) GET(path, key string) *Response {
	return h.Do(Request{Method: http.MethodGet, Path: path, Key: key})
}

// Do sends a request and validates the answer against openapi/ride.yaml.
func (h *Harness) Do(r Request) *Response {
	GinkgoHelper()
	var body io.Reader
	switch b := r.Body.(type) {
	case nil:
	case []byte:
		body = bytes.NewReader(b)
	case string:
		body = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		Expect(err).NotTo(HaveOccurred())
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequest(r.Method, h.URL+r.Path, body)
	Expect(err).NotTo(HaveOccurred())
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.Key != "" {
		req.Header.Set("Authorization", "Bearer "+r.Key)
	}
	for k, v := range r.Header {
		req.Header.Set(k, v)
	}
	return h.Send(req)
}

// Send sends a request made by the spec and checks its answer as Do does.
func (h *Harness) Send(req *http.Request) *Response {
	GinkgoHelper()
	res, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	Expect(err).NotTo(HaveOccurred())
	out := &Response{Status: res.StatusCode, Header: res.Header, Body: data}
	Expect(validateResponse(req, out)).To(Succeed(), "%s %s answered %d %s", req.Method, req.URL.Path, res.StatusCode, data)
	Expect(res.Header.Get("X-Request-Id")).To(HavePrefix("req_"), "every response carries X-Request-Id")
	Expect(leaks(data)).To(Succeed(), "%s %s leaks internal data", req.Method, req.URL.Path)
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/problem+json") {
		Expect(internalWording(data)).To(Succeed(), "%s %s", req.Method, req.URL.Path)
	}
	return out
}

var validateMu sync.Mutex

// validateResponse checks an answer against the operation the request matches, or, for a
// request the document has no operation for, checks it is a problem+json error.
func validateResponse(req *http.Request, res *Response) error {
	lookup := req.Clone(context.Background())
	if lookup.Method == http.MethodHead {
		lookup.Method = http.MethodGet
	}
	lookup.URL, _ = url.Parse(req.URL.String())
	route, pathParams, err := validator.router.FindRoute(lookup)
	if err != nil {
		if res.Status != http.StatusNotFound && res.Status != http.StatusMethodNotAllowed {
			return fmt.Errorf("no operation for %s %s, yet the answer is %d", req.Method, req.URL.Path, res.Status)
		}
		return validateProblem(res)
	}
	if res.Status >= 400 && strings.HasPrefix(res.Header.Get("Content-Type"), "application/problem+json") {
		if err := validateProblem(res); err != nil {
			return err
		}
		if res.Status == http.StatusMethodNotAllowed || res.Status == http.StatusRequestEntityTooLarge || res.Status == http.StatusUnsupportedMediaType {
			return nil // answers of the transport, not of one operation
		}
	}
	if err := declaredHeaders(route, res); err != nil {
		return err
	}
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: lookup, PathParams: pathParams, Route: route,
		},
		Status: res.Status,
		Header: res.Header,
		Body:   io.NopCloser(bytes.NewReader(res.Body)),
		Options: &openapi3filter.Options{
			IncludeResponseStatus: true,
			MultiError:            true,
			ExcludeResponseBody:   req.Method == http.MethodHead,
		},
	}
	validateMu.Lock()
	defer validateMu.Unlock()
	return openapi3filter.ValidateResponse(context.Background(), input)
}

// framingHeaders are HTTP's own headers about the message, which no operation declares.
var framingHeaders = map[string]bool{
	"Content-Type": true, "Content-Length": true, "Date": true, "Transfer-Encoding": true,
	"Connection": true, "Keep-Alive": true,
}

// declaredHeaders checks that every header of the answer is one the document declares for
// the operation's answer of that status: a header a client cannot learn of from the document
// is as much a defect as an undeclared status.
func declaredHeaders(route *routers.Route, res *Response) error {
	declared := route.Operation.Responses.Status(res.Status)
	if declared == nil {
		declared = route.Operation.Responses.Default()
	}
	if declared == nil || declared.Value == nil {
		return nil // the status itself is undeclared: ValidateResponse says so
	}
	var missing []string
	for name := range res.Header {
		if framingHeaders[name] {
			continue
		}
		found := false
		for d := range declared.Value.Headers {
			if strings.EqualFold(d, name) {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("%s %s answered %d with headers its document does not declare: %s",
			route.Method, route.Path, res.Status, strings.Join(missing, ", "))
	}
	return nil
}

func validateProblem(res *Response) error {
	if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" {
		return fmt.Errorf("error answer has Content-Type %q, want application/problem+json", ct)
	}
	var v any
	if err := json.Unmarshal(res.Body, &v); err != nil {
		return fmt.Errorf("problem body is not JSON: %w", err)
	}
	return validator.doc.Components.Schemas["Problem"].Value.VisitJSON(v)
}
