package tests

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server"
	"github.com/rideapi/ride/server/pipeline"
	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/store/storetest"
)

// faultProxy stands between the server and PostgreSQL on 127.0.0.1 and fails the way networks
// and databases do: it passes bytes through, stalls (connections stay open, nothing moves), or
// drops (every connection is cut and new ones are closed at once).
type faultProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	mode  string // "pass", "stall" or "drop"
	conns map[net.Conn]bool
	// holding maps the connections whose bytes a stall holds to their other end.
	holding map[net.Conn]net.Conn
}

func newFaultProxy(target string) *faultProxy {
	GinkgoHelper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	p := &faultProxy{ln: ln, target: target, mode: "pass", conns: map[net.Conn]bool{}, holding: map[net.Conn]net.Conn{}}
	go p.accept()
	DeferCleanup(p.close)
	return p
}

func (p *faultProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		mode := p.mode
		if mode != "drop" {
			p.conns[client] = true
		}
		p.mu.Unlock()
		if mode == "drop" {
			client.Close()
			continue
		}
		server, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns[server] = true
		p.mu.Unlock()
		go p.pipe(client, server)
		go p.pipe(server, client)
	}
}

// pipe copies from src to dst while the proxy passes; stalled, it holds the bytes.
func (p *faultProxy) pipe(src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for {
			p.mu.Lock()
			mode := p.mode
			if mode == "stall" && n > 0 {
				p.holding[src] = dst
			}
			p.mu.Unlock()
			if mode == "pass" {
				break
			}
			if mode == "drop" {
				src.Close()
				dst.Close()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				src.Close()
				return
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

func (p *faultProxy) set(mode string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = mode
	p.holding = map[net.Conn]net.Conn{}
	if mode == "drop" {
		for c := range p.conns {
			c.Close()
		}
		p.conns = map[net.Conn]bool{}
	}
}

// held is how many connections a stall holds bytes of.
func (p *faultProxy) held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.holding)
}

// cutHeld resets the connections whose bytes a stall holds, both ends, and passes everything
// else again: a network that broke the connections busy at that moment, and only those.
func (p *faultProxy) cutHeld() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for src, dst := range p.holding {
		for _, c := range []net.Conn{src, dst} {
			if tcp, ok := c.(*net.TCPConn); ok {
				_ = tcp.SetLinger(0)
			}
			c.Close()
		}
	}
	p.holding = map[net.Conn]net.Conn{}
	p.mode = "pass"
}

func (p *faultProxy) close() {
	p.ln.Close()
	p.set("drop")
}

// lockedBuffer collects a logger's lines from several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// behindFaultProxy serves a fresh PostgreSQL database reached through a faultProxy, with a
// logger whose lines the spec reads.
func behindFaultProxy(ctx context.Context, cfg server.Config, opts ...store.Option) (*Harness, *faultProxy, *lockedBuffer) {
	GinkgoHelper()
	base := os.Getenv("TEST_DATABASE_URL")
	if base == "" {
		Skip("needs PostgreSQL (TEST_DATABASE_URL)")
	}
	dbURL, drop, err := storetest.NewPostgresDatabase(ctx, base)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(drop)
	direct, err := url.Parse(dbURL)
	Expect(err).NotTo(HaveOccurred())
	proxy := newFaultProxy(direct.Host)
	viaProxy := *direct
	viaProxy.Host = proxy.ln.Addr().String()

	st, err := store.Open(ctx, viaProxy.String(), opts...)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(st.Close)
	Expect(st.Migrate(ctx)).To(Succeed())
	logs := &lockedBuffer{}
	return serveStore(st, cfg, slog.New(slog.NewJSONHandler(logs, nil))), proxy, logs
}

var _ = Describe("A database that stops answering", Label("postgres"), func() {
	It("answers a request whose connection is reset 503 alone: the next ones are served and no outage is declared", SpecTimeout(time.Minute), func(ctx SpecContext) {
		h, proxy, logs := behindFaultProxy(ctx, server.Config{})
		Expect(h.GET("/v1/trips?limit=1", h.Admin).Status).To(Equal(http.StatusOK))

		// The stall may first hold a statement of the server's own background work (a key
		// revision poll, a webhook claim), and the cut then miss the request, which the proxy
		// passes again: such a round shows nothing and is tried anew, three rounds that caught
		// the request at most ten tries.
		for caught, tries := 0, 0; caught < 3; tries++ {
			Expect(tries).To(BeNumerically("<", 10), "the cut caught the request in flight in only %d of %d tries", caught, tries)
			By(fmt.Sprintf("try %d: the connection of a request in flight is reset", tries+1))
			proxy.set("stall")
			inFlight := make(chan *Response, 1)
			go func() {
				defer GinkgoRecover()
				inFlight <- h.GET("/v1/trips?limit=1", h.Admin)
			}()
			Eventually(proxy.held).WithTimeout(10 * time.Second).WithPolling(time.Millisecond).Should(BeNumerically(">", 0))
			proxy.cutHeld()
			if res := <-inFlight; res.Status != http.StatusOK {
				ExpectProblem(res, http.StatusServiceUnavailable, "unavailable")
				caught++
			}
			for range 5 {
				Expect(h.GET("/v1/trips?limit=1", h.Admin).Status).To(Equal(http.StatusOK),
					"one reset connection is that request's failure, not an outage")
			}
		}
		Expect(h.GET("/readyz", "").Status).To(Equal(http.StatusOK))
		Expect(logs.String()).NotTo(ContainSubstring("database unavailable"))
		Expect(logs.String()).To(ContainSubstring("a request could not reach the database; probing it"))
	})

	It("answers a GraphQL request whose fields cannot reach the database 503 once, as REST, not an error and a log line per field", SpecTimeout(time.Minute), func(ctx SpecContext) {
		const bound = time.Second
		h, proxy, logs := behindFaultProxy(ctx, server.Config{DatabaseTimeout: bound}, store.WithReadTimeout(bound))
		city := h.NewCity(CityOpts{})
		var trips []string
		for range 3 {
			trips = append(trips, h.NewTrip(TripOpts{Driver: h.NewDriver(DriverOpts{City: city.ID}), Rider: h.NewRider()}).ID)
		}
		var doc strings.Builder
		doc.WriteString("{")
		for i, id := range trips {
			fmt.Fprintf(&doc, " t%d: trip(id: %q) { id status }", i, id)
		}
		doc.WriteString(" }")
		query := func() *Response {
			return h.Do(Request{Method: http.MethodPost, Path: "/v1/graphql", Key: h.Admin, Body: map[string]any{"query": doc.String()}})
		}
		Expect(query().Status).To(Equal(http.StatusOK))

		proxy.set("stall")
		res := query()
		ExpectProblem(res, http.StatusServiceUnavailable, "unavailable")
		Expect(res.Header.Get("Retry-After")).To(Equal("5"))
		Expect(logs.String()).NotTo(ContainSubstring("graphql field failed"))
		Expect(logs.String()).To(ContainSubstring("a request could not reach the database; probing it"))

		proxy.set("pass")
		Eventually(func() int { return query().Status }).WithTimeout(10 * time.Second).WithPolling(100 * time.Millisecond).Should(Equal(http.StatusOK))
	})

	It("answers every request within its bound while the database stalls, more at once than the pool holds, then recovers with no key left locked", SpecTimeout(2*time.Minute), func(ctx SpecContext) {
		// The bound of this server (RIDE_DB_TIMEOUT), and what an answer may take beyond it:
		// writing the 503 and the client's own work.
		const bound, slack = time.Second, time.Second
		h, proxy, logs := behindFaultProxy(ctx, server.Config{DatabaseTimeout: bound}, store.WithReadTimeout(bound))
		city := h.NewCity(CityOpts{})
		estimate := func(key string) *Response {
			return h.Do(Request{Method: http.MethodPost, Path: "/v1/fare-estimates", Key: h.Admin,
				Header: map[string]string{"Idempotency-Key": key}, Body: estimateBody(city, "economy")})
		}
		trip := h.NewTrip(TripOpts{Driver: h.NewDriver(DriverOpts{City: city.ID}), Rider: h.NewRider()})
		Expect(h.GET("/v1/trips?limit=1", h.Admin).Status).To(Equal(http.StatusOK))
		Expect(h.GET("/v1/trips/"+trip.ID, h.Admin).Status).To(Equal(http.StatusOK))

		var mu sync.Mutex
		var slowest time.Duration
		timed := func(r Request) *Response {
			start := time.Now()
			res := h.Do(r)
			mu.Lock()
			slowest = max(slowest, time.Since(start))
			mu.Unlock()
			return res
		}
		expectUnavailable := func(res *Response) {
			GinkgoHelper()
			ExpectProblem(res, http.StatusServiceUnavailable, "unavailable")
			Expect(res.Header.Get("Retry-After")).To(Equal("5"))
		}

		By("a stall: connections stay open and nothing comes back, and six times the pool's requests arrive at once")
		proxy.set("stall")
		var wg sync.WaitGroup
		for i := range 6 * store.DefaultPool.PoolSize() {
			wg.Go(func() {
				defer GinkgoRecover()
				if i == 0 {
					expectUnavailable(timed(Request{Method: http.MethodPost, Path: "/v1/fare-estimates", Key: h.Admin,
						Header: map[string]string{"Idempotency-Key": "outage-key"}, Body: estimateBody(city, "economy")}))
					return
				}
				path := "/v1/trips?limit=1"
				if i%2 == 1 {
					path = "/v1/trips/" + trip.ID // reads of one trip share statements: they wait apart
				}
				expectUnavailable(timed(Request{Method: http.MethodGet, Path: path, Key: h.Admin}))
			})
		}
		wg.Wait()
		start := time.Now()
		ready := h.GET("/readyz", "")
		readyTook := time.Since(start)
		Expect(ready.Status).To(Equal(http.StatusServiceUnavailable))
		Expect(readyTook).To(BeNumerically("<", pipeline.ReadinessTimeout+slack), "/readyz answers within its bound")

		By("a drop: every connection cut, new ones refused")
		proxy.set("drop")
		for range 3 {
			expectUnavailable(timed(Request{Method: http.MethodGet, Path: "/v1/trips?limit=1", Key: h.Admin}))
		}
		AddReportEntry("slowest answer while the database was away", slowest.String())
		AddReportEntry("/readyz during the stall", readyTook.String())
		Expect(slowest).To(BeNumerically("<", bound+slack), "no answer slower than the bound plus %s", slack)

		By("the database back: the same process serves again, and the key is free")
		proxy.set("pass")
		Eventually(func() int { return h.GET("/v1/trips?limit=1", h.Admin).Status }).
			WithTimeout(10 * time.Second).WithPolling(100 * time.Millisecond).Should(Equal(http.StatusOK))
		Eventually(func() int { return estimate("outage-key").Status }).
			WithTimeout(5 * time.Second).WithPolling(100 * time.Millisecond).Should(Equal(http.StatusCreated))
		Expect(h.GET("/readyz", "").Status).To(Equal(http.StatusOK))

		Eventually(logs.String).WithTimeout(5 * time.Second).Should(ContainSubstring("database answers again"))
		Expect(strings.Count(logs.String(), "database unavailable")).To(Equal(1), "logged once per outage:\n%s", logs.String())
		Expect(logs.String()).NotTo(ContainSubstring(`"msg":"request failed"`))
	})
})
