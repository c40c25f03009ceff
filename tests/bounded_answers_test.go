package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server/auth"
)

// maxFindings is the longest errors[] of an answer (server/README.md, "Budgets").
const maxFindings = 50

var _ = ForEachEngine("Answers to bad input", func(h *Harness) {
	var rider string
	BeforeEach(func() { rider = h.Key(auth.RoleRider, h.NewRider().ID) })
	estimate := func(body []byte) *Response {
		return h.Do(Request{Method: http.MethodPost, Path: "/v1/fare-estimates", Key: rider, Body: body})
	}
	unknownMembers := func(size int) []byte {
		var b bytes.Buffer
		b.WriteString(`{"ride_type":"economy"`)
		for i := 0; b.Len() < size-40; i++ {
			fmt.Fprintf(&b, `,"m%d":1`, i)
		}
		return append(b.Bytes(), '}')
	}

	It("serves the largest input of each kind within the memory budget of a request", func() {
		driver := h.NewDriver(DriverOpts{})
		driverKey := h.Key(auth.RoleDriver, driver.ID)
		var aliases, positions, faulty strings.Builder
		for i := range 999 {
			fmt.Fprintf(&aliases, " a%d:name", i)
		}
		positions.WriteString(`{"positions":[`)
		for i := 0; positions.Len() < 1<<20-100; i++ {
			if i > 0 {
				positions.WriteByte(',')
			}
			positions.WriteString(`{"lat":37.7,"lng":-122.4,"recorded_at":"2026-01-01T00:00:00Z"}`)
		}
		positions.WriteString("]}")
		faulty.WriteString(`{"positions":[`)
		for i := range 1000 {
			if i > 0 {
				faulty.WriteByte(',')
			}
			faulty.WriteString(`{"lat":"north","lng":500,"recorded_at":"yesterday","altitude":1}`)
		}
		faulty.WriteString("]}")
		gql := func(query string) []byte {
			b, err := json.Marshal(map[string]any{"query": query})
			Expect(err).NotTo(HaveOccurred())
			return b
		}
		for _, c := range []struct {
			name, key, path string
			body            []byte
			status          int
		}{
			{"the 990-field document", rider, "/v1/graphql", gql(`{ driver(id: "` + driver.ID + `") {` + strings.Repeat(" name", 990) + ` } }`), http.StatusOK},
			{"1,000 distinct fields", rider, "/v1/graphql", gql(`{ driver(id: "` + driver.ID + `") {` + aliases.String() + ` } }`), http.StatusOK},
			{"1 MiB of position reports", driverKey, "/v1/drivers/" + driver.ID + "/positions", []byte(positions.String()), http.StatusBadRequest},
			{"1 MiB of unknown members", rider, "/v1/fare-estimates", unknownMembers(1 << 20), http.StatusBadRequest},
			{"1,000 position reports with four faults each", driverKey, "/v1/drivers/" + driver.ID + "/positions", []byte(faulty.String()), http.StatusBadRequest},
		} {
			res, allocated := serveInProcess(h, http.MethodPost, c.path, c.key, c.body)
			Expect(res.Status).To(Equal(c.status), "%s: %.300s", c.name, res.Body)
			AddReportEntry(c.name+": bytes allocated", allocated)
			Expect(allocated).To(BeNumerically("<", requestMemoryBudget), c.name)
		}
	})

	It("answers 1 MiB of unknown members with a short list, whatever the body holds", func() {
		body := unknownMembers(1 << 20)
		Expect(len(body)).To(BeNumerically("<=", 1<<20))
		res := estimate(body)
		ExpectProblem(res, http.StatusBadRequest, "invalid_request")
		Expect(len(*res.Problem().Errors)).To(BeNumerically("<=", maxFindings))
		Expect(len(res.Body)).To(BeNumerically("<", 16<<10), "the answer is a few kilobytes, not megabytes")
		Expect(*res.Problem().Errors).To(ContainElement(HaveField("Message", "holds more than 1000 members")))
	})

	It("lists the first findings of a body with more, and says how many there were", func() {
		var b strings.Builder
		b.WriteString(`{"ride_type":"economy"`)
		for i := range 999 {
			fmt.Fprintf(&b, `,"m%03d":1`, i)
		}
		b.WriteString("}")
		res := estimate([]byte(b.String()))
		ExpectProblem(res, http.StatusBadRequest, "invalid_request")
		Expect(*res.Problem().Errors).To(HaveLen(maxFindings))
		Expect((*res.Problem().Errors)[0].Location).To(Equal("body.m000"))
		Expect(*res.Problem().Detail).To(ContainSubstring("errors[] lists the first 50 findings of 1001"))

		res = h.GET("/v1/trips?"+strings.Repeat("x=1&", 60)+strings.Repeat("y=1&", 60), h.Admin)
		ExpectProblem(res, http.StatusBadRequest, "invalid_request")
		Expect(len(*res.Problem().Errors)).To(BeNumerically("<=", maxFindings))
	})

	It("clips a member name it quotes", func() {
		long := strings.Repeat("n", 100_000)
		res := estimate([]byte(`{"ride_type":"economy","` + long + `":1}`))
		ExpectProblem(res, http.StatusBadRequest, "invalid_request")
		for _, f := range *res.Problem().Errors {
			Expect(len([]rune(f.Location))).To(BeNumerically("<=", 201), problemClipForLog(f.Location))
		}
		Expect(len(res.Body)).To(BeNumerically("<", 4<<10))
		res = h.GET("/v1/trips?"+long+"=1", h.Admin)
		ExpectProblem(res, http.StatusBadRequest, "invalid_request")
		Expect(len(res.Body)).To(BeNumerically("<", 4<<10))
	})

	It("takes every number the schema takes: 1.0 is an integer", func() {
		p := h.newPayable("completed")
		body := fmt.Sprintf(`{"trip_id":%q,"amount":%d.0,"currency":"usd","payment_method":"pm_card_visa"}`, p.trip.ID, p.trip.FareTotal)
		res := h.pay(p.riderKey, newIdempotencyKey(), body)
		Expect(res.Status).To(Equal(http.StatusCreated), "%s", res.Body)
		Expect(res.JSON()["amount"]).To(BeNumerically("==", p.trip.FareTotal))

		other := h.newPayable("completed")
		body = fmt.Sprintf(`{"trip_id":%q,"amount":%de0,"currency":"usd","payment_method":"pm_card_visa"}`, other.trip.ID, other.trip.FareTotal)
		Expect(h.pay(other.riderKey, newIdempotencyKey(), body).Status).To(Equal(http.StatusCreated))
	})

	DescribeTable("words every refusal in the API's terms, naming the input",
		func(method, path, body, location string) {
			key := h.Admin
			var req Request
			if body != "" {
				req = Request{Method: method, Path: path, Key: key, Body: []byte(body), Header: map[string]string{"Idempotency-Key": newIdempotencyKey()}}
			} else {
				req = Request{Method: method, Path: path, Key: key}
			}
			res := h.Do(req) // the harness checks every problem for internal wording
			Expect(res.Status).To(Equal(http.StatusBadRequest), "%s", res.Body)
			Expect(*res.Problem().Errors).To(ContainElement(HaveField("Location", location)), "%s", res.Body)
		},
		Entry("a limit that is not a number", http.MethodGet, "/v1/trips?limit=abc", "", "query.limit"),
		Entry("a limit with a fraction", http.MethodGet, "/v1/trips?limit=1.5", "", "query.limit"),
		Entry("a date that does not exist", http.MethodGet, "/v1/trips?created_after=2026-02-30T00:00:00Z", "", "query.created_after"),
		Entry("a 60th second", http.MethodGet, "/v1/events?created_before=2026-01-01T00:00:60Z", "", "query.created_before"),
		Entry("an offset past 23 hours", http.MethodGet, "/v1/trips?created_before=2026-01-01T10:00:00%2B25:00", "", "query.created_before"),
		Entry("a date that is no date", http.MethodGet, "/v1/trips?pickup_time_after=soon", "", "query.pickup_time_after"),
		Entry("an unknown status", http.MethodGet, "/v1/trips?status=flying", "", "query.status"),
		Entry("an empty trip filter, which would list every event", http.MethodGet, "/v1/events?trip_id=", "", "query.trip_id"),
		Entry("a latitude that is a string", http.MethodPost, "/v1/fare-estimates",
			`{"origin":{"lat":"north","lng":0},"destination":{"lat":0,"lng":0},"ride_type":"economy"}`, "body.origin.lat"),
		Entry("a number too large to read", http.MethodPost, "/v1/fare-estimates",
			`{"origin":{"lat":0,"lng":1e999},"destination":{"lat":0,"lng":0},"ride_type":"economy"}`, "body.origin.lng"),
		Entry("an amount with a fraction", http.MethodPost, "/v1/payments",
			`{"trip_id":"trp_aaaaaaaaaaaaaaaaaaaaaaaaaa","amount":1.5,"currency":"usd","payment_method":"pm_card_visa"}`, "body.amount"),
		Entry("an amount past 64 bits", http.MethodPost, "/v1/payments",
			`{"trip_id":"trp_aaaaaaaaaaaaaaaaaaaaaaaaaa","amount":1e30,"currency":"usd","payment_method":"pm_card_visa"}`, "body.amount"),
		Entry("an unknown member", http.MethodPost, "/v1/payments",
			`{"trip_id":"trp_aaaaaaaaaaaaaaaaaaaaaaaaaa","amount":1,"currency":"usd","payment_method":"pm_card_visa","tip":1}`, "body.tip"),
		Entry("a missing member", http.MethodPost, "/v1/payments",
			`{"trip_id":"trp_aaaaaaaaaaaaaaaaaaaaaaaaaa","currency":"usd","payment_method":"pm_card_visa"}`, "body.amount"),
		Entry("a position recorded at a 60th second", http.MethodPost, "/v1/drivers/drv_aaaaaaaaaaaaaaaaaaaaaaaaaa/positions",
			`{"positions":[{"lat":1,"lng":1,"recorded_at":"2026-01-01T00:00:60Z"}]}`, "body.positions.0.recorded_at"),
	)
})

// requestMemoryBudget is what one request may allocate (server/README.md, "What one request
// may cost").
const requestMemoryBudget = 8 << 20

// serveInProcess serves one request through the harness's handler, in this process, and
// returns the answer (validated against the document) and the bytes the process allocated
// meanwhile: the request's own, and the little the server's background work allocated.
func serveInProcess(h *Harness, method, path, key string, body []byte) (*Response, uint64) {
	GinkgoHelper()
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	h.server.ServeHTTP(rec, req)
	runtime.ReadMemStats(&after)
	res := &Response{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
	check, err := http.NewRequest(method, h.URL+path, nil)
	Expect(err).NotTo(HaveOccurred())
	Expect(validateResponse(check, res)).To(Succeed(), "%s %s: %.300s", method, path, res.Body)
	return res, after.TotalAlloc - before.TotalAlloc
}

// problemClipForLog keeps a failure message short.
func problemClipForLog(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
