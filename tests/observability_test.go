package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/store"
)

// fetch GETs a path outside the OpenAPI document (/metrics, /docs), which the harness's
// validating Do would rightly refuse to check against it.
func fetch(h *Harness, path string) (int, http.Header, string) {
	GinkgoHelper()
	res, err := http.Get(h.URL + path)
	Expect(err).NotTo(HaveOccurred())
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	Expect(err).NotTo(HaveOccurred())
	Expect(res.Header.Get("X-Request-Id")).To(HavePrefix("req_"))
	return res.StatusCode, res.Header, string(body)
}

// scrape reads a server's Prometheus exposition.
func scrape(h *Harness) string {
	GinkgoHelper()
	status, header, body := fetch(h, "/metrics")
	Expect(status).To(Equal(200))
	Expect(header.Get("Content-Type")).To(HavePrefix("text/plain"))
	return body
}

// logBuffer collects a server's JSON log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// requestLine finds the request log line of the answer with the given request id.
func (b *logBuffer) requestLine(requestID string) map[string]any {
	GinkgoHelper()
	for _, line := range strings.Split(b.String(), "\n") {
		if line == "" {
			continue
		}
		var entry map[string]any
		Expect(json.Unmarshal([]byte(line), &entry)).To(Succeed(), "not a JSON log line: %s", line)
		if entry["msg"] == "request" && entry["request_id"] == requestID {
			return entry
		}
	}
	Fail("no request log line for " + requestID + " in:\n" + b.String())
	return nil
}

var _ = Describe("Observability", func() {
	h := harnessFor("sqlite") // engine-independent

	It("logs one JSON line per request with its id, route, status, latency and principal, never the key", func() {
		logs := &logBuffer{}
		api, _ := h.Replica(server.Config{RateLimitRead: 50, RateLimitPeriod: slowRefill}, slog.New(slog.NewJSONHandler(logs, nil)))
		key := api.Key(auth.RoleAdmin, "")

		res := api.GET("/v1/trips/trp_nosuchtrip0000000000000000?fields=id", key)
		Expect(res.Status).To(Equal(404))
		line := logs.requestLine(res.Header.Get("X-Request-Id"))
		Expect(line).To(HaveKeyWithValue("level", "INFO"))
		Expect(line).To(HaveKeyWithValue("method", "GET"))
		Expect(line).To(HaveKeyWithValue("route", "/v1/trips/{tripId}"))
		Expect(line).To(HaveKeyWithValue("path", "/v1/trips/trp_nosuchtrip0000000000000000"))
		Expect(line).To(HaveKeyWithValue("status", BeEquivalentTo(404)))
		Expect(line).To(HaveKeyWithValue("duration_ms", BeNumerically(">", 0)))
		Expect(line).To(HaveKeyWithValue("key_id", HavePrefix("key_")))
		Expect(line).To(HaveKeyWithValue("role", "admin"))

		By("a refused key is logged with its route and without a principal")
		res = api.GET("/v1/trips", "rk_wrong-key-that-must-not-be-logged")
		Expect(res.Status).To(Equal(401))
		line = logs.requestLine(res.Header.Get("X-Request-Id"))
		Expect(line).To(HaveKeyWithValue("route", "/v1/trips"))
		Expect(line).To(HaveKeyWithValue("status", BeEquivalentTo(401)))
		Expect(line).NotTo(HaveKey("key_id"))

		By("HEAD is logged as HEAD; unknown paths share one route label")
		res = api.Do(Request{Method: http.MethodHead, Path: "/v1/trips", Key: key})
		Expect(logs.requestLine(res.Header.Get("X-Request-Id"))).To(HaveKeyWithValue("method", "HEAD"))
		res = api.GET("/v1/no/such/path", key)
		Expect(logs.requestLine(res.Header.Get("X-Request-Id"))).To(HaveKeyWithValue("route", "unmatched"))

		all := logs.String()
		Expect(all).NotTo(ContainSubstring(key))
		Expect(all).NotTo(ContainSubstring("rk_wrong-key"))
		Expect(all).NotTo(ContainSubstring("Bearer"))
	})

	It("logs a GraphQL socket when it ends, under its route and the caller its first message named", func() {
		logs := &logBuffer{}
		api, _ := h.Replica(server.Config{}, slog.New(slog.NewJSONHandler(logs, nil)))
		key := api.Key(auth.RoleAdmin, "")

		conn, res, err := websocket.Dial(context.Background(), "ws"+api.URL[len("http"):]+"/v1/graphql",
			&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = conn.CloseNow() })
		socket := &rawSocket{conn: conn}
		socket.init(key)
		Expect(conn.Close(websocket.StatusNormalClosure, "done")).To(Succeed())

		requestID := res.Header.Get("X-Request-Id")
		Expect(requestID).NotTo(BeEmpty())
		Eventually(logs.String).WithTimeout(10 * time.Second).Should(ContainSubstring(`"request_id":"` + requestID + `"`))
		line := logs.requestLine(requestID)
		Expect(line).To(HaveKeyWithValue("route", "/v1/graphql"))
		Expect(line).To(HaveKeyWithValue("status", BeEquivalentTo(http.StatusSwitchingProtocols)))
		Expect(line).To(HaveKeyWithValue("key_id", HavePrefix("key_")))
		Expect(line).To(HaveKeyWithValue("role", "admin"))
		Expect(logs.String()).NotTo(ContainSubstring(key))
	})

	It("serves Prometheus metrics at /metrics without a key", func() {
		api, _ := h.Replica(server.Config{RateLimitRead: 1, RateLimitPeriod: slowRefill}, nil)
		key := api.Key(auth.RoleAdmin, "")
		Expect(api.GET("/v1/trips?limit=1", key).Status).To(Equal(200))
		Expect(api.GET("/v1/trips?limit=1", key).Status).To(Equal(200))
		Expect(api.GET("/v1/trips?limit=1", key).Status).To(Equal(429))
		Expect(api.GET("/v1/trips", "").Status).To(Equal(401))

		metrics := scrape(api)
		Expect(metrics).To(ContainSubstring(`ride_http_requests_total{method="GET",route="/v1/trips",status="200"} 2`))
		Expect(metrics).To(ContainSubstring(`ride_http_requests_total{method="GET",route="/v1/trips",status="429"} 1`))
		Expect(metrics).To(ContainSubstring(`ride_http_requests_total{method="GET",route="/v1/trips",status="401"} 1`))
		Expect(metrics).To(ContainSubstring(`ride_http_request_duration_seconds_bucket{method="GET",route="/v1/trips",status="200",le="+Inf"} 2`))
		Expect(metrics).To(ContainSubstring(`ride_rate_limited_total{class="read"} 1`))
		Expect(metrics).To(ContainSubstring("ride_idempotency_replays_total 0"))
		Expect(metrics).To(ContainSubstring(`ride_webhook_deliveries_total{outcome="delivered"} 0`))
		Expect(metrics).To(ContainSubstring(`go_sql_open_connections{db_name="ride"}`))
		Expect(metrics).To(ContainSubstring(`go_sql_wait_count_total{db_name="ride"}`))
		Expect(metrics).To(ContainSubstring("ride_ready 1"))
		Expect(metrics).To(ContainSubstring("go_goroutines"))

		By("the scrape itself is counted under its own route")
		Expect(scrape(api)).To(ContainSubstring(`ride_http_requests_total{method="GET",route="/metrics",status="200"} 1`))
	})

	It("keeps its request series bounded whatever methods a caller without a key invents", func() {
		api, _ := h.Replica(server.Config{}, nil)
		for i := range 40 {
			method := fmt.Sprintf("PROBE%02d", i)
			Expect(api.Do(Request{Method: method, Path: "/v1/trips"}).Status).To(Equal(http.StatusMethodNotAllowed))
			Expect(api.Do(Request{Method: method, Path: "/v1/no/such/path"}).Status).To(Equal(http.StatusNotFound))
		}
		metrics := scrape(api)
		Expect(metrics).NotTo(ContainSubstring("PROBE"))
		Expect(metrics).To(ContainSubstring(`ride_http_requests_total{method="other",route="unmatched",status="405"} 40`))
		Expect(metrics).To(ContainSubstring(`ride_http_requests_total{method="other",route="unmatched",status="404"} 40`))
		Expect(strings.Count(metrics, "\nride_http_requests_total{")).To(BeNumerically("<=", 3), "the two kinds of probe and the scrape")
	})

	It("counts idempotency replays", func() {
		api, _ := h.Replica(server.Config{}, nil)
		city := h.NewCity(CityOpts{})
		key := api.Key(auth.RoleRider, h.NewRider().ID)
		request := Request{Method: http.MethodPost, Path: "/v1/fare-estimates", Key: key, Body: estimateBody(city, "economy"),
			Header: map[string]string{"Idempotency-Key": newIdempotencyKey()}}
		Expect(api.Do(request).Status).To(Equal(http.StatusCreated))
		Expect(scrape(api)).To(ContainSubstring("ride_idempotency_replays_total 0"))
		replayed := api.Do(request)
		Expect(replayed.Header.Get("Idempotent-Replayed")).To(Equal("true"))
		Expect(scrape(api)).To(ContainSubstring("ride_idempotency_replays_total 1"))
	})

	It("declares the webhook delivery outcomes for the delivery worker to count", func() {
		api, srv := h.Replica(server.Config{}, nil)
		srv.Metrics().WebhookDeliveries.WithLabelValues("retry").Inc()
		metrics := scrape(api)
		Expect(metrics).To(ContainSubstring(`ride_webhook_deliveries_total{outcome="retry"} 1`))
		Expect(metrics).To(ContainSubstring(`ride_webhook_deliveries_total{outcome="failed"} 0`))
	})

	Describe("GET /readyz", func() {
		It("is 503 until the server is marked ready (while migrations run), then 200", func() {
			api, srv := h.Replica(server.Config{}, nil)
			srv.SetReady(false)
			res := api.GET("/readyz", "")
			Expect(res.Status).To(Equal(503))
			Expect(res.Problem().Code).To(Equal("unavailable"))
			Expect(api.GET("/healthz", "").Status).To(Equal(200), "alive all the same")
			Expect(scrape(api)).To(ContainSubstring("ride_ready 0"))
			srv.SetReady(true)
			Expect(api.GET("/readyz", "").Status).To(Equal(200))
		})

		It("is 503 while the database is down", func(ctx SpecContext) {
			st, err := store.Open(ctx, "sqlite://"+GinkgoT().TempDir()+"/ride.db")
			Expect(err).NotTo(HaveOccurred())
			Expect(st.Migrate(ctx)).To(Succeed())
			down := &Harness{Engine: "sqlite", Store: st}
			api, _ := down.Replica(server.Config{}, nil)
			Expect(api.GET("/readyz", "").Status).To(Equal(200))

			Expect(st.Close()).To(Succeed())
			res := api.GET("/readyz", "")
			Expect(res.Status).To(Equal(503))
			Expect(res.Problem().Code).To(Equal("unavailable"))
		})
	})

})
