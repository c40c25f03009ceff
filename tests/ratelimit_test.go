package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"

	"github.com/rideapi/ride/server"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/ride"
)

// rateHeaders are an answer's RateLimit-* headers as numbers; -1 when absent.
type rateHeaders struct{ Limit, Remaining, Reset int }

func rateOf(res *Response) rateHeaders {
	GinkgoHelper()
	num := func(name string) int {
		v := res.Header.Get(name)
		if v == "" {
			return -1
		}
		n, err := strconv.Atoi(v)
		Expect(err).NotTo(HaveOccurred(), "%s: %q", name, v)
		return n
	}
	return rateHeaders{num("RateLimit-Limit"), num("RateLimit-Remaining"), num("RateLimit-Reset")}
}

func expectNoRateHeaders(res *Response) {
	GinkgoHelper()
	for _, name := range []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} {
		Expect(res.Header.Values(name)).To(BeEmpty(), name)
	}
}

func expectRateLimited(res *Response) {
	GinkgoHelper()
	Expect(res.Status).To(Equal(http.StatusTooManyRequests), "%s", res.Body)
	Expect(res.Problem().Code).To(Equal("rate_limited"))
	retry, err := strconv.Atoi(res.Header.Get("Retry-After"))
	Expect(err).NotTo(HaveOccurred(), "Retry-After: %q", res.Header.Get("Retry-After"))
	Expect(retry).To(BeNumerically(">=", 1))
	Expect(rateOf(res).Remaining).To(Equal(0))
}

// slowRefill stretches the rate period so that no token comes back while a spec runs: with
// a rate of r per minute, one token returns every 60/r seconds, far longer than a spec's
// few requests take even on a loaded machine. The arithmetic is the same as per second.
const slowRefill = time.Minute

// testRedisURL is the Redis the shared-limit specs use: TEST_REDIS_URL, or the local one.
func testRedisURL() string {
	if u := os.Getenv("TEST_REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// requireRedis returns a client of the test Redis. CI must test the shared limiter, so an
// unreachable Redis fails there; on a developer's machine without one the spec is skipped.
func requireRedis() *redis.Client {
	GinkgoHelper()
	opts, err := redis.ParseURL(testRedisURL())
	Expect(err).NotTo(HaveOccurred())
	client := redis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		if os.Getenv("CI") != "" {
			Fail(fmt.Sprintf("Redis at %s is unreachable (%v): CI must test the shared rate limiter; .ci/run starts Redis", testRedisURL(), err))
		}
		Skip(fmt.Sprintf("Redis at %s is unreachable (%v); set TEST_REDIS_URL or start redis-server", testRedisURL(), err))
	}
	DeferCleanup(client.Close)
	return client
}

// uniqueRedisPrefix namespaces one spec's buckets and deletes them, and only them, afterwards.
func uniqueRedisPrefix(client *redis.Client) string {
	prefix := "ride-test:" + ride.NewID("t")[2:14] + ":"
	DeferCleanup(func(ctx SpecContext) {
		// redis_rate stores a bucket under "rate:" + our key.
		iter := client.Scan(ctx, 0, "rate:"+prefix+"*", 100).Iterator()
		for iter.Next(ctx) {
			Expect(client.Del(ctx, iter.Val()).Err()).To(Succeed())
		}
		Expect(iter.Err()).To(Succeed())
	})
	return prefix
}

var _ = Describe("Rate limits", func() {
	h := harnessFor("sqlite") // rate limits do not depend on the engine

	It("are off in the shared harness: the zero Config has none, so no RateLimit headers", func() {
		res := h.GET("/v1/trips?limit=1", h.Admin)
		Expect(res.Status).To(Equal(200))
		expectNoRateHeaders(res)
	})

	It("meter each key's reads in process, and answer 429 problem+json with Retry-After when the bucket is empty", func() {
		api, _ := h.Replica(server.Config{RateLimitRead: 2, RateLimitWrite: 1, RateLimitPeriod: slowRefill}, nil)
		key := api.Key(auth.RoleAdmin, "")

		// A bucket of twice the rate, full at first; HEAD is a read like GET.
		for want := 3; want >= 0; want-- {
			method := http.MethodGet
			if want%2 == 0 {
				method = http.MethodHead
			}
			res := api.Do(Request{Method: method, Path: "/v1/trips?limit=1", Key: key})
			Expect(res.Status).To(Equal(200))
			got := rateOf(res)
			Expect(got.Limit).To(Equal(4))
			Expect(got.Remaining).To(Equal(want))
			Expect(got.Reset).To(BeNumerically(">", 0))
			Expect(got.Reset).To(BeNumerically("<=", 120)) // 4 tokens at 2 per minute
		}
		res := api.GET("/v1/trips?limit=1", key)
		expectRateLimited(res)
		Expect(strconv.Atoi(res.Header.Get("Retry-After"))).To(BeNumerically("<=", 30)) // one token every 30 s
		Expect(res.Problem().Detail).To(HaveValue(ContainSubstring("read budget")))

		By("the budget is per key")
		Expect(api.GET("/v1/trips/trp_nosuchtrip0000000000000000", key).Status).To(Equal(429))
		other := api.Key(auth.RoleAdmin, "")
		res = api.GET("/v1/trips/trp_nosuchtrip0000000000000000", other)
		Expect(res.Status).To(Equal(404))
		Expect(rateOf(res)).To(Equal(rateHeaders{Limit: 4, Remaining: 3, Reset: rateOf(res).Reset}))
	})

	It("keep writes in a bucket of their own, fare estimates included, and count GraphQL as a read", func() {
		api, _ := h.Replica(server.Config{RateLimitRead: 3, RateLimitWrite: 1, RateLimitPeriod: slowRefill}, nil)
		city := h.NewCity(CityOpts{})
		rider := h.NewRider()
		key := api.Key(auth.RoleRider, rider.ID)
		estimate := func() *Response {
			return api.Do(Request{Method: http.MethodPost, Path: "/v1/fare-estimates", Key: key, Body: estimateBody(city, "economy")})
		}

		for want := 1; want >= 0; want-- {
			res := estimate()
			Expect(res.Status).To(Equal(http.StatusCreated), "%s", res.Body)
			Expect(rateOf(res).Limit).To(Equal(2), "the write bucket: twice the write rate")
			Expect(rateOf(res).Remaining).To(Equal(want))
		}
		denied := estimate()
		expectRateLimited(denied)
		Expect(denied.Problem().Detail).To(HaveValue(ContainSubstring("write budget")))

		By("reads draw on the other bucket, GraphQL over POST among them")
		res := api.GET("/v1/trips?limit=1", key)
		Expect(res.Status).To(Equal(200))
		Expect(rateOf(res)).To(Equal(rateHeaders{Limit: 6, Remaining: 5, Reset: rateOf(res).Reset}))
		res = api.Do(Request{Method: http.MethodPost, Path: "/v1/graphql", Key: key,
			Body: map[string]any{"query": "{ trip(id: \"trp_nosuchtrip0000000000000000\") { id } }"}})
		Expect(res.Status).To(Equal(200), "%s", res.Body)
		Expect(rateOf(res).Limit).To(Equal(6))
		Expect(rateOf(res).Remaining).To(Equal(4))
	})

	It("leave unauthenticated requests alone: no budget spent, no headers", func() {
		api, _ := h.Replica(server.Config{RateLimitRead: 1, RateLimitWrite: 1, RateLimitPeriod: slowRefill}, nil)
		for range 5 {
			res := api.GET("/v1/trips", "")
			Expect(res.Status).To(Equal(401))
			expectNoRateHeaders(res)
			res = api.GET("/healthz", "")
			Expect(res.Status).To(Equal(200))
			expectNoRateHeaders(res)
		}
		res := api.GET("/v1/trips", "rk_not-a-key")
		Expect(res.Status).To(Equal(401))
		expectNoRateHeaders(res)
	})

	It("charge nothing for a 304, and answer a matching conditional GET even on an empty bucket", func() {
		api, _ := h.Replica(server.Config{RateLimitRead: 1, RateLimitPeriod: slowRefill}, nil)
		key := api.Key(auth.RoleAdmin, "")
		driver := h.NewDriver(DriverOpts{})
		path := "/v1/drivers/" + driver.ID

		first := api.GET(path, key)
		Expect(first.Status).To(Equal(200))
		Expect(rateOf(first).Remaining).To(Equal(1))
		etag := first.Header.Get("ETag")
		conditional := Request{Method: http.MethodGet, Path: path, Key: key, Header: map[string]string{"If-None-Match": etag}}

		for range 5 {
			res := api.Do(conditional)
			Expect(res.Status).To(Equal(304))
			Expect(rateOf(res).Limit).To(Equal(2))
			Expect(rateOf(res).Remaining).To(Equal(1), "a 304 gives its token back")
		}
		Expect(rateOf(api.GET(path, key)).Remaining).To(Equal(0))

		By("the bucket is empty: a matching conditional GET is still a 304, anything else a 429")
		for range 3 {
			res := api.Do(conditional)
			Expect(res.Status).To(Equal(304))
			Expect(res.Header.Get("ETag")).To(Equal(etag))
			Expect(rateOf(res).Remaining).To(Equal(0))
		}
		expectRateLimited(api.GET(path, key))
		stale := api.Do(Request{Method: http.MethodGet, Path: path, Key: key, Header: map[string]string{"If-None-Match": `"stale"`}})
		expectRateLimited(stale)
		Expect(stale.Header.Get("ETag")).To(BeEmpty(), "the representation the 429 replaced is not described")
		Expect(stale.Header.Get("Cache-Control")).To(BeEmpty())
	})

	It("give each in-process replica its own budget", func() {
		cfg := server.Config{RateLimitRead: 5, RateLimitPeriod: slowRefill}
		a, _ := h.Replica(cfg, nil)
		b, _ := h.Replica(cfg, nil)
		key := a.Key(auth.RoleAdmin, "")
		passed := 0
		for i := range 30 {
			replica := a
			if i%2 == 1 {
				replica = b
			}
			if replica.GET("/v1/trips?limit=1", key).Status == 200 {
				passed++
			}
		}
		Expect(passed).To(Equal(20), "two buckets of 10: why REDIS_URL exists")
	})

	It("fall back to the process's own buckets when Redis is unreachable, without waiting on it", func() {
		logs := &lockedBuffer{}
		api, _ := h.Replica(server.Config{RateLimitRead: 1, RateLimitPeriod: slowRefill, RedisURL: "redis://127.0.0.1:1/0"},
			slog.New(slog.NewJSONHandler(logs, nil)))
		key := api.Key(auth.RoleAdmin, "")
		var slowest time.Duration
		for i := range 2 {
			start := time.Now()
			res := api.GET("/v1/trips?limit=1", key)
			slowest = max(slowest, time.Since(start))
			Expect(res.Status).To(Equal(200))
			Expect(rateOf(res).Limit).To(Equal(2), "request %d keeps its RateLimit headers", i+1)
			Expect(rateOf(res).Remaining).To(Equal(1 - i))
		}
		// Burst 2, metered by the process while Redis is away.
		expectRateLimited(api.GET("/v1/trips?limit=1", key))
		AddReportEntry("slowest answer with Redis unreachable", slowest.String())
		Expect(scrape(api)).To(ContainSubstring("ride_rate_limit_errors_total 3"))
		// One warning for the outage, and every line of the log JSON, the Redis client's too.
		Expect(strings.Count(logs.String(), "rate limit store unreachable")).To(Equal(1), logs.String())
		for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			Expect(json.Valid([]byte(line))).To(BeTrue(), line)
		}
	})

	Context("shared through Redis", func() {
		It("make two replicas enforce one budget", func() {
			client := requireRedis()
			cfg := server.Config{
				RateLimitRead: 5, RateLimitWrite: 5, RateLimitPeriod: slowRefill,
				RedisURL: testRedisURL(), RateLimitKeyPrefix: uniqueRedisPrefix(client),
			}
			a, _ := h.Replica(cfg, nil)
			b, _ := h.Replica(cfg, nil)
			key := a.Key(auth.RoleAdmin, "")

			// Rate 5, burst 10: ten requests spread over both replicas pass, counting down one
			// shared bucket...
			for i := range 10 {
				replica := a
				if i%2 == 1 {
					replica = b
				}
				res := replica.GET("/v1/trips?limit=1", key)
				Expect(res.Status).To(Equal(200), "request %d", i+1)
				Expect(rateOf(res).Limit).To(Equal(10))
				Expect(rateOf(res).Remaining).To(Equal(9-i), "request %d", i+1)
			}
			// ...and the eleventh is refused on either.
			expectRateLimited(a.GET("/v1/trips?limit=1", key))
			expectRateLimited(b.GET("/v1/trips?limit=1", key))

			By("a 304 is free on the shared bucket too")
			other := a.Key(auth.RoleAdmin, "")
			first := a.GET("/v1/trips?limit=1", other)
			Expect(rateOf(first).Remaining).To(Equal(9))
			res := b.Do(Request{Method: http.MethodGet, Path: "/v1/trips?limit=1", Key: other,
				Header: map[string]string{"If-None-Match": first.Header.Get("ETag")}})
			Expect(res.Status).To(Equal(304))
			Expect(rateOf(res).Remaining).To(Equal(9))
		})
	})
})
