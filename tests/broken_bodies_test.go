package tests

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server"
	"github.com/rideapi/ride/server/auth"
)

// brokenBody is a request whose body does not arrive as announced, and what its client does
// once it has sent what it sends.
type brokenBody struct {
	name string
	// header holds the framing header lines (Content-Length or Transfer-Encoding).
	header string
	body   string
	// then is what the client does after sending: "half-close" (no more bytes, waits for
	// the answer), "reset" (the connection ends with a TCP reset: no answer can arrive), or
	// "wait" (stays silent until the server's read deadline passes).
	then string
	// status and code are the answer; zero for a reset.
	status int
	code   string
}

// rawExchange sends a POST of b to path over a connection of its own and returns the answer,
// validated against the document, or nil after a reset.
func rawExchange(serverURL, path, key string, b brokenBody) *Response {
	GinkgoHelper()
	addr := strings.TrimPrefix(serverURL, "http://")
	conn, err := net.Dial("tcp", addr)
	Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	tcp := conn.(*net.TCPConn)
	head := "POST " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + key +
		"\r\nContent-Type: application/json\r\n" + b.header + "\r\n\r\n"
	_, err = io.WriteString(conn, head+b.body)
	Expect(err).NotTo(HaveOccurred())
	switch b.then {
	case "reset":
		Expect(tcp.SetLinger(0)).To(Succeed()) // Close sends RST instead of FIN
		return nil
	case "half-close":
		Expect(tcp.CloseWrite()).To(Succeed())
	}
	Expect(conn.SetReadDeadline(time.Now().Add(time.Minute))).To(Succeed())
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	Expect(err).NotTo(HaveOccurred(), b.name)
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	Expect(err).NotTo(HaveOccurred())
	out := &Response{Status: res.StatusCode, Header: res.Header, Body: data}
	req, err := http.NewRequest(http.MethodPost, serverURL+path, nil)
	Expect(err).NotTo(HaveOccurred())
	Expect(validateResponse(req, out)).To(Succeed(), "%s: %d %s", b.name, res.StatusCode, data)
	Expect(internalWording(data)).To(Succeed(), b.name)
	return out
}

var _ = ForEachEngine("A request body that does not arrive as announced", func(h *Harness) {
	It("is that request's own 400 or 408, while every other client is served and the process stays out of outage mode", SpecTimeout(2*time.Minute), func(ctx SpecContext) {
		logs := &lockedBuffer{}
		srv, err := server.New(testConfig(), server.Deps{Store: h.Store,
			Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})), Starting: true})
		Expect(err).NotTo(HaveOccurred())
		// The binary's transport bounds a whole request (15 s); this server's, 2 s.
		ts := httptest.NewUnstartedServer(srv)
		ts.Config.ReadTimeout = 2 * time.Second
		ts.Start()
		DeferCleanup(func() {
			ts.Close()
			_ = srv.Close()
		})
		served := &Harness{Engine: h.Engine, Store: h.Store, URL: ts.URL, Admin: h.Admin}
		rider := h.Key(auth.RoleRider, h.NewRider().ID)
		Expect(served.GET("/v1/trips?limit=1", h.Admin).Status).To(Equal(http.StatusOK))

		// Other clients read trips the whole time, each answer counted by its status.
		var mu sync.Mutex
		others := map[int]int{}
		stop := make(chan struct{})
		var readers sync.WaitGroup
		for range 2 {
			readers.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					req, _ := http.NewRequest(http.MethodGet, ts.URL+"/v1/trips?limit=1", nil)
					req.Header.Set("Authorization", "Bearer "+h.Admin)
					res, err := http.DefaultClient.Do(req)
					status := -1
					if err == nil {
						_, _ = io.Copy(io.Discard, res.Body)
						res.Body.Close()
						status = res.StatusCode
					}
					mu.Lock()
					others[status]++
					mu.Unlock()
				}
			})
		}

		estimate := `{"origin":{"lat":37.79,"lng":-122.39},"destination":{"lat":37.76,"lng":-122.41},"ride_type":"economy"}`
		cases := []brokenBody{
			{name: "shorter than its Content-Length", header: "Content-Length: 500", body: estimate[:40],
				then: "half-close", status: http.StatusBadRequest, code: "malformed_body"},
			{name: "reset mid-body", header: "Content-Length: 500", body: estimate[:40], then: "reset"},
			{name: "a chunk size that is not hex", header: "Transfer-Encoding: chunked", body: "zz\r\n" + estimate + "\r\n0\r\n\r\n",
				then: "half-close", status: http.StatusBadRequest, code: "malformed_body"},
			{name: "a chunk size past 64 bits", header: "Transfer-Encoding: chunked", body: "fffffffffffffffffffff\r\n" + estimate + "\r\n0\r\n\r\n",
				then: "half-close", status: http.StatusBadRequest, code: "malformed_body"},
			{name: "a chunk extension longer than a line may be", header: "Transfer-Encoding: chunked",
				body: "3;" + strings.Repeat("x", 5000) + "\r\n{}\r\n0\r\n\r\n", then: "half-close", status: http.StatusBadRequest, code: "malformed_body"},
			{name: "a chunk longer than its size", header: "Transfer-Encoding: chunked", body: "3\r\n" + estimate + "\r\n0\r\n\r\n",
				then: "half-close", status: http.StatusBadRequest, code: "malformed_body"},
			{name: "a truncated chunked body", header: "Transfer-Encoding: chunked", body: "400\r\n" + estimate,
				then: "half-close", status: http.StatusBadRequest, code: "malformed_body"},
			{name: "too slow: the read deadline passes mid-body", header: "Content-Length: 500", body: estimate[:40],
				then: "wait", status: http.StatusRequestTimeout, code: "request_timeout"},
		}
		for _, c := range cases {
			By(c.name)
			for _, path := range []string{"/v1/fare-estimates", "/v1/graphql"} {
				if res := rawExchange(ts.URL, path, rider, c); res != nil {
					Expect(res.Status).To(Equal(c.status), "%s %s: %s", c.name, path, res.Body)
					Expect(res.Problem().Code).To(Equal(c.code), "%s %s", c.name, path)
				}
				// The very next request of another client is served.
				Expect(served.GET("/v1/trips?limit=1", h.Admin).Status).To(Equal(http.StatusOK), "after %s on %s", c.name, path)
			}
		}
		close(stop)
		readers.Wait()

		mu.Lock()
		defer mu.Unlock()
		AddReportEntry("other clients' answers by status", others)
		Expect(others).To(HaveKey(http.StatusOK))
		Expect(others).To(HaveLen(1), "every other client's request was served: %v", others)
		Expect(logs.String()).NotTo(ContainSubstring(`"level":"ERROR"`))
		Expect(logs.String()).NotTo(ContainSubstring("database"), "nothing about the database was logged:\n%s", logs.String())
	})
})
