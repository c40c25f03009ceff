package pipeline

import (
	"database/sql"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rideapi/ride/server/auth"
)

// Metrics are one server's Prometheus collectors, served at GET /metrics. Each server has its
// own registry, so several servers in one process (tests, replicas) never collide.
//
// Code elsewhere in the server counts its events here: the idempotency layer increments
// IdempotencyReplays, the webhook worker WebhookDeliveries.
type Metrics struct {
	registry *prometheus.Registry

	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	series   sync.Map // requestSeries → requestCollectors

	// IdempotencyReplays counts answers replayed from a stored Idempotency-Key record.
	IdempotencyReplays prometheus.Counter
	// WebhookDeliveries counts webhook delivery attempts by outcome: "delivered" (2xx),
	// "retry" (scheduled again), "failed" (permanent rejection or past the horizon).
	WebhookDeliveries *prometheus.CounterVec

	rateLimited     *prometheus.CounterVec
	rateLimitErrors prometheus.Counter
	// Auth are the authenticator's counters: keys refused, and keys read from the database.
	Auth  auth.Metrics
	ready prometheus.Gauge
}

// latencyBuckets reach from a cached read (about a millisecond) to a slow write (seconds).
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// NewMetrics registers every collector. db may be nil (no pool statistics).
func NewMetrics(db *sql.DB) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ride_http_requests_total",
			Help: "HTTP requests answered, by method, route (the OpenAPI path template) and status.",
		}, []string{"method", "route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ride_http_request_duration_seconds",
			Help:    "Time from receiving a request to finishing its answer, by method, route and status.",
			Buckets: latencyBuckets,
		}, []string{"method", "route", "status"}),
		IdempotencyReplays: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ride_idempotency_replays_total",
			Help: "Answers replayed from a stored Idempotency-Key record.",
		}),
		WebhookDeliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ride_webhook_deliveries_total",
			Help: "Webhook delivery attempts by outcome (delivered, retry, failed).",
		}, []string{"outcome"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ride_rate_limited_total",
			Help: "Requests answered 429 because the API key's bucket was empty, by class (read, write).",
		}, []string{"class"}),
		rateLimitErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ride_rate_limit_errors_total",
			Help: "Requests let through unmetered because the rate-limit store (Redis) failed.",
		}),
		Auth: auth.Metrics{
			Failures: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "ride_auth_failures_total",
				Help: "Requests refused for their API key (401), by outcome (refused).",
			}, []string{"outcome"}),
			Lookups: prometheus.NewCounter(prometheus.CounterOpts{
				Name: "ride_auth_key_lookups_total",
				Help: "API keys read from the database by their hash: keys this replica knows exist but has not cached. Unknown keys cost none.",
			}),
		},
		ready: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ride_ready",
			Help: "1 when the server is ready for traffic (migrations done), else 0.",
		}),
	}
	m.registry.MustRegister(m.requests, m.duration, m.IdempotencyReplays, m.WebhookDeliveries,
		m.rateLimited, m.rateLimitErrors, m.Auth.Failures, m.Auth.Lookups, m.ready,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Declared outcomes show up at zero before the first delivery, so dashboards and alerts
	// can refer to them from the start.
	for _, outcome := range []string{"delivered", "retry", "failed"} {
		m.WebhookDeliveries.WithLabelValues(outcome)
	}
	m.Auth.Failures.WithLabelValues("refused")
	if db != nil {
		m.registry.MustRegister(collectors.NewDBStatsCollector(db, "ride"))
	}
	return m
}

// observeRequest counts one answered request. A method HTTP does not define is counted as
// "other": any token is a method to net/http, and one series per token a caller invents would
// grow the registry, and every scrape, without bound.
func (m *Metrics) observeRequest(method, route string, status int, elapsed time.Duration) {
	if !knownMethods[method] {
		method = methodOther
	}
	key := requestSeries{method: method, route: route, status: status}
	s, ok := m.series.Load(key)
	if !ok {
		// WithLabelValues hashes and checks the labels on every call; the series of a
		// (method, route, status) never change, and there are few of them.
		code := strconv.Itoa(status)
		s, _ = m.series.LoadOrStore(key, requestCollectors{
			count:    m.requests.WithLabelValues(method, route, code),
			duration: m.duration.WithLabelValues(method, route, code),
		})
	}
	c := s.(requestCollectors)
	c.count.Inc()
	c.duration.Observe(elapsed.Seconds())
}

// methodOther labels the requests whose method is none of knownMethods.
const methodOther = "other"

var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
	http.MethodConnect: true, http.MethodTrace: true,
}

// requestSeries names the series of one kind of answered request.
type requestSeries struct {
	method, route string
	status        int
}

type requestCollectors struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

// SetReady records whether the server takes traffic.
func (m *Metrics) SetReady(ready bool) {
	if ready {
		m.ready.Set(1)
	} else {
		m.ready.Set(0)
	}
}

// Handler serves the metrics in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}
