package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/webhooks"
)

// Bounds for Eventually: a first attempt lands well under a second after commit; the retry
// specs wait for a few steps of the 1s,2s schedule.
const (
	firstAttemptWithin = 10 * time.Second
	retriesWithin      = 20 * time.Second
	pollEvery          = 20 * time.Millisecond
)

var _ = ForEachEngine("Webhook deliveries", func(h *Harness) {
	It("delivers a subscribed event once, signed, with the contract's headers and body", func() {
		receiver := NewReceiver(nil)
		id, secret := h.RegisterEndpoint(receiver.URL+"/hooks", "trip.completed", "payment.succeeded")
		event := h.AppendEvent("trip.completed")

		Eventually(func() []Call { return receiver.CallsFor(event.ID) }).
			WithTimeout(firstAttemptWithin).WithPolling(pollEvery).Should(HaveLen(1))
		call := receiver.CallsFor(event.ID)[0]
		Expect(call.Header.Get("Content-Type")).To(Equal("application/json"))
		Expect(call.Header.Get("X-Ride-Event")).To(Equal("trip.completed"))
		Expect(call.Header.Get("X-Ride-Event-Id")).To(Equal(event.ID))
		Expect(call.Header.Get("X-Ride-Delivery-Attempt")).To(Equal("1"))
		Expect(call.Header.Get("X-Ride-Signature")).To(MatchRegexp(`^t=\d+,v1=[0-9a-f]{64}$`))
		Expect(webhooks.Verify(call.Body, call.Header.Get("X-Ride-Signature"), []string{secret}, 0)).To(Succeed())
		Expect(call.Header.Get("webhook-id")).To(Equal(event.ID))
		Expect(call.Header.Get("webhook-signature")).To(MatchRegexp(`^v1,[A-Za-z0-9+/]{43}=$`))
		Expect(webhooks.VerifyStandard(call.Body, call.Header, []string{secret}, 0)).To(Succeed())

		// The body is the event exactly as GET /v1/events/{id} shows it.
		var body map[string]any
		Expect(json.Unmarshal(call.Body, &body)).To(Succeed())
		Expect(body).To(HaveKeyWithValue("id", event.ID))
		Expect(body).To(HaveKeyWithValue("type", "trip.completed"))
		Expect(body["data"]).To(HaveKeyWithValue("fare", map[string]any{"total": 1850.0, "currency": "usd"}))
		Expect(call.Body).To(MatchJSON(h.GET("/v1/events/"+event.ID, h.Admin).Body))
		Expect(validateEventBody(call.Body)).To(Succeed())

		Eventually(func() []map[string]any { return h.Deliveries(id) }).
			WithTimeout(firstAttemptWithin).WithPolling(pollEvery).Should(ConsistOf(And(
			HaveKeyWithValue("event_id", event.ID), HaveKeyWithValue("event_type", "trip.completed"),
			HaveKeyWithValue("attempt", 1.0), HaveKeyWithValue("status", "succeeded"),
			HaveKeyWithValue("response_status", 200.0), HaveKeyWithValue("error", BeNil()),
			HaveKeyWithValue("next_attempt_at", BeNil()), HaveKey("latency_ms"), HaveKey("attempted_at"),
		)))
	})

	It("sends only the kinds an endpoint subscribed to, and only events created after its registration", func() {
		before := h.AppendEvent("trip.completed")
		receiver := NewReceiver(nil)
		h.RegisterEndpoint(receiver.URL, "trip.completed")
		other := h.AppendEvent("trip.cancelled")
		wanted := h.AppendEvent("trip.completed")

		Eventually(func() []Call { return receiver.CallsFor(wanted.ID) }).
			WithTimeout(firstAttemptWithin).WithPolling(pollEvery).Should(HaveLen(1))
		// Deliveries are made with their events and claimed in the order they fell due, so
		// one of the earlier events would have arrived by now.
		Expect(receiver.CallsFor(before.ID)).To(BeEmpty())
		Expect(receiver.CallsFor(other.ID)).To(BeEmpty())
	})

	It("retries a receiver that answers 500 twice, with growing delays, until it acknowledges", func() {
		receiver := NewReceiver(func(c Call) Answer {
			if c.Nth <= 2 {
				return Answer{Status: http.StatusInternalServerError}
			}
			return Answer{Status: http.StatusNoContent}
		})
		id, secret := h.RegisterEndpoint(receiver.URL, "trip.started")
		event := h.AppendEvent("trip.started")

		Eventually(func() []Call { return receiver.CallsFor(event.ID) }).
			WithTimeout(retriesWithin).WithPolling(pollEvery).Should(HaveLen(3))
		calls := receiver.CallsFor(event.ID)
		for i, c := range calls {
			Expect(c.Header.Get("X-Ride-Delivery-Attempt")).To(Equal([]string{"1", "2", "3"}[i]))
			Expect(c.Header.Get("webhook-id")).To(Equal(event.ID), "the same id on every retry")
			Expect(c.Body).To(Equal(calls[0].Body), "the same body on every retry")
			// Signed afresh on every attempt.
			Expect(webhooks.VerifyAt(c.Body, c.Header.Get("X-Ride-Signature"), []string{secret}, time.Second, c.At)).To(Succeed())
		}

		var log []map[string]any
		Eventually(func() []map[string]any { log = h.Deliveries(id); return log }).
			WithTimeout(firstAttemptWithin).WithPolling(pollEvery).Should(HaveLen(3))
		// Newest first: the acknowledgement, then the two failures, each naming its retry.
		Expect(log[0]).To(And(HaveKeyWithValue("attempt", 3.0), HaveKeyWithValue("status", "succeeded"),
			HaveKeyWithValue("response_status", 204.0)))
		for i, a := range log[1:] {
			Expect(a).To(And(HaveKeyWithValue("attempt", float64(2-i)), HaveKeyWithValue("status", "pending"),
				HaveKeyWithValue("response_status", 500.0), HaveKeyWithValue("error", ContainSubstring("500")),
				HaveKeyWithValue("next_attempt_at", Not(BeNil()))))
		}
		// The schedule is 1 s then 2 s, as the server recorded it: each retry was due that long
		// after the failure, and none was attempted before it was due.
		expectRetryDelays(log, time.Second, 2*time.Second)

		// The log pages like every list.
		page := h.GET("/v1/webhook-endpoints/"+id+"/deliveries?limit=2", h.Admin).JSON()
		next := page["pagination"].(map[string]any)["next_cursor"].(string)
		rest := h.GET("/v1/webhook-endpoints/"+id+"/deliveries?limit=2&cursor="+next, h.Admin).JSON()
		Expect(rest["data"].([]any)).To(HaveLen(1))
		Expect(rest["data"].([]any)[0].(map[string]any)["attempt"]).To(Equal(1.0))
	})

	It("stops at a 410 and disables the endpoint", func() {
		gone := NewReceiver(func(Call) Answer { return Answer{Status: http.StatusGone} })
		goneID, _ := h.RegisterEndpoint(gone.URL, "trip.arriving")
		witness := NewReceiver(nil)
		h.RegisterEndpoint(witness.URL, "trip.arriving")

		first := h.AppendEvent("trip.arriving")
		Eventually(func() string { return h.GET("/v1/webhook-endpoints/"+goneID, h.Admin).JSON()["status"].(string) }).
			WithTimeout(firstAttemptWithin).WithPolling(pollEvery).Should(Equal("disabled"))
		Expect(gone.CallsFor(first.ID)).To(HaveLen(1))
		Expect(h.Deliveries(goneID)).To(ConsistOf(And(HaveKeyWithValue("status", "failed"),
			HaveKeyWithValue("response_status", 410.0), HaveKeyWithValue("error", ContainSubstring("disabled")))))

		// A later event reaches the witness, and never the disabled endpoint.
		second := h.AppendEvent("trip.arriving")
		Eventually(func() []Call { return witness.CallsFor(second.ID) }).
			WithTimeout(firstAttemptWithin).WithPolling(pollEvery).Should(HaveLen(1))
		Expect(gone.Calls()).To(HaveLen(1))
	})

	It("stops at another 4xx without disabling the endpoint", func() {
		receiver := NewReceiver(func(Call) Answer { return Answer{Status: http.StatusBadRequest} })
		id, _ := h.RegisterEndpoint(receiver.URL, "trip.cancelled")
		event := h.AppendEvent("trip.cancelled")
		Eventually(func() []map[string]any { return h.Deliveries(id) }).
			WithTimeout(firstAttemptWithin).WithPolling(pollEvery).Should(ConsistOf(And(
			HaveKeyWithValue("status", "failed"), HaveKeyWithValue("response_status", 400.0),
			HaveKeyWithValue("next_attempt_at", BeNil()))))
		Expect(receiver.CallsFor(event.ID)).To(HaveLen(1))
		Expect(h.GET("/v1/webhook-endpoints/"+id, h.Admin).JSON()["status"]).To(Equal("enabled"))
	})

	DescribeTable("retries answers that are not a permanent rejection",
		func(first Answer, delay time.Duration) {
			receiver := NewReceiver(func(c Call) Answer {
				if c.Nth == 1 {
					return first
				}
				return Answer{Status: http.StatusOK}
			})
			id, _ := h.RegisterEndpoint(receiver.URL, "payment.failed")
			event := h.AppendEvent("payment.failed")
			Eventually(func() []Call { return receiver.CallsFor(event.ID) }).
				WithTimeout(retriesWithin).WithPolling(pollEvery).Should(HaveLen(2))
			Eventually(func() []map[string]any { return h.Deliveries(id) }).
				WithTimeout(firstAttemptWithin).WithPolling(pollEvery).Should(HaveLen(2))
			log := h.Deliveries(id)
			expectRetryDelays(log, delay)
			Expect(log[0]).To(HaveKeyWithValue("status", "succeeded"))
			Expect(log[1]).To(HaveKeyWithValue("status", "pending"))
		},
		Entry("408", Answer{Status: http.StatusRequestTimeout}, time.Second),
		Entry("429 with a longer Retry-After, which is honoured", Answer{Status: http.StatusTooManyRequests, Header: map[string]string{"Retry-After": "3"}}, 3*time.Second),
		Entry("503", Answer{Status: http.StatusServiceUnavailable}, time.Second),
		Entry("a redirect, which is not followed", Answer{Status: http.StatusFound, Header: map[string]string{"Location": "/elsewhere"}}, time.Second),
		Entry("a timeout (the test client gives up after 2s; the retry is due 1s after it)", Answer{Hang: true}, time.Second),
	)

	It("records why a timed-out attempt failed", func() {
		receiver := NewReceiver(func(c Call) Answer {
			if c.Nth == 1 {
				return Answer{Hang: true}
			}
			return Answer{Status: http.StatusOK}
		})
		id, _ := h.RegisterEndpoint(receiver.URL, "payment.succeeded")
		h.AppendEvent("payment.succeeded")
		Eventually(func() []map[string]any { return h.Deliveries(id) }).
			WithTimeout(retriesWithin).WithPolling(pollEvery).Should(ContainElement(And(
			HaveKeyWithValue("attempt", 1.0), HaveKeyWithValue("status", "pending"),
			HaveKeyWithValue("response_status", BeNil()), HaveKeyWithValue("error", ContainSubstring("timeout")))))
	})

	It("delivers everything a receiver missed while it was down, once it is back", func() {
		down := NewReceiver(nil)
		addr := down.Listener.Addr().String()
		id, _ := h.RegisterEndpoint("http://"+addr+"/hooks", "trip.created")
		down.Close() // connection refused from now on

		var ids []string
		for range 20 {
			ids = append(ids, h.AppendEvent("trip.created").ID)
		}
		// Every event was tried and failed while the receiver was down.
		Eventually(func() map[string]bool {
			failed := map[string]bool{}
			for _, a := range h.Deliveries(id) {
				if a["status"] == "pending" && strings.Contains(a["error"].(string), "connection") {
					failed[a["event_id"].(string)] = true
				}
			}
			return failed
		}).WithTimeout(firstAttemptWithin).WithPolling(pollEvery).Should(HaveLen(20))

		back := NewReceiverOn(addr, nil)
		cameBack := time.Now()
		Eventually(func() map[string]bool {
			got := map[string]bool{}
			for _, c := range back.Calls() {
				got[c.EventID] = true
			}
			return got
		}).WithTimeout(retriesWithin).WithPolling(pollEvery).Should(HaveLen(20))
		var last time.Time
		for _, e := range ids {
			Expect(back.CallsFor(e)).To(HaveLen(1))
			Expect(back.CallsFor(e)[0].Attempt).To(BeNumerically(">=", 2))
			if at := back.CallsFor(e)[0].At; at.After(last) {
				last = at
			}
		}
		AddReportEntry(fmt.Sprintf("receiver down [%s]", h.Engine), fmt.Sprintf(
			"20 events failed while down; all 20 arrived, once each, within %s of the receiver coming back",
			last.Sub(cameBack).Round(time.Millisecond)))
	})

	Describe("secret rotation", func() {
		rotate := func(id string, grace int) map[string]any {
			res := h.Do(Request{Method: http.MethodPost, Path: "/v1/webhook-endpoints/" + id + "/secret-rotations", Key: h.Admin,
				Body: map[string]any{"grace_period_seconds": grace}})
			Expect(res.Status).To(Equal(http.StatusCreated))
			return res.JSON()
		}
		deliver := func(receiver *Receiver) Call {
			event := h.AppendEvent("trip.completed")
			Eventually(func() []Call { return receiver.CallsFor(event.ID) }).
				WithTimeout(firstAttemptWithin).WithPolling(pollEvery).Should(HaveLen(1))
			return receiver.CallsFor(event.ID)[0]
		}

		It("signs with the old and the new secret during the grace window, and with the new one only after it", func() {
			receiver := NewReceiver(nil)
			id, old := h.RegisterEndpoint(receiver.URL, "trip.completed")
			newer := rotate(id, 3600)["secret"].(string)

			call := deliver(receiver)
			Expect(call.Header.Get("X-Ride-Signature")).To(MatchRegexp(`^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$`))
			Expect(strings.Fields(call.Header.Get("webhook-signature"))).To(HaveLen(2))
			for _, secret := range []string{old, newer} {
				Expect(webhooks.Verify(call.Body, call.Header.Get("X-Ride-Signature"), []string{secret}, 0)).To(Succeed())
				Expect(webhooks.VerifyStandard(call.Body, call.Header, []string{secret}, 0)).To(Succeed())
			}

			// A short grace window, then its end.
			newest := rotate(id, 1)
			expires, err := time.Parse(time.RFC3339Nano, newest["previous_secret_expires_at"].(string))
			Expect(err).NotTo(HaveOccurred())
			Eventually(func() bool { return time.Now().After(expires) }).WithTimeout(5 * time.Second).Should(BeTrue())

			call = deliver(receiver)
			Expect(call.Header.Get("X-Ride-Signature")).To(MatchRegexp(`^t=\d+,v1=[0-9a-f]{64}$`))
			Expect(webhooks.Verify(call.Body, call.Header.Get("X-Ride-Signature"), []string{newest["secret"].(string)}, 0)).To(Succeed())
			Expect(webhooks.VerifyStandard(call.Body, call.Header, []string{newest["secret"].(string)}, 0)).To(Succeed())
			for _, retired := range []string{old, newer} {
				Expect(webhooks.Verify(call.Body, call.Header.Get("X-Ride-Signature"), []string{retired}, 0)).To(MatchError(webhooks.ErrNoValidSignature))
				Expect(webhooks.VerifyStandard(call.Body, call.Header, []string{retired}, 0)).To(MatchError(webhooks.ErrNoValidSignature))
			}
		})

		It("revokes the old secret at once with a grace period of 0", func() {
			receiver := NewReceiver(nil)
			id, old := h.RegisterEndpoint(receiver.URL, "trip.completed")
			rotation := rotate(id, 0)
			call := deliver(receiver)
			Expect(webhooks.Verify(call.Body, call.Header.Get("X-Ride-Signature"), []string{rotation["secret"].(string)}, 0)).To(Succeed())
			Expect(webhooks.Verify(call.Body, call.Header.Get("X-Ride-Signature"), []string{old}, 0)).To(MatchError(webhooks.ErrNoValidSignature))
		})
	})
})

// validateEventBody checks a delivery body against the Event schema of the document, which
// consumers generate their receiver types from.
func validateEventBody(body []byte) error {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return err
	}
	return validator.doc.Components.Schemas["Event"].Value.VisitJSON(v)
}

// expectRetryDelays reads a deliveries log (newest first) as the server recorded it: each
// attempt that scheduled a retry scheduled it want[i] after it ended (it started at
// attempted_at and took latency_ms, however long the host made it take), and no attempt was
// made before it was due.
func expectRetryDelays(log []map[string]any, want ...time.Duration) {
	GinkgoHelper()
	at := func(a map[string]any, name string) time.Time {
		t, err := time.Parse(time.RFC3339Nano, a[name].(string))
		Expect(err).NotTo(HaveOccurred())
		return t
	}
	var delays []time.Duration
	for i := len(log) - 1; i >= 0; i-- {
		a := log[i]
		if a["next_attempt_at"] == nil {
			continue
		}
		due := at(a, "next_attempt_at")
		took := time.Duration(a["latency_ms"].(float64)) * time.Millisecond // whole milliseconds, rounded down
		delays = append(delays, due.Sub(at(a, "attempted_at"))-took)
		if i > 0 {
			Expect(at(log[i-1], "attempted_at")).NotTo(BeTemporally("<", due), "attempt %v came before it was due", log[i-1]["attempt"])
		}
	}
	Expect(delays).To(HaveLen(len(want)))
	// Both times are stored to the microsecond, each rounded down: their difference is the true
	// one to within a microsecond either way.
	const stored = time.Microsecond
	for i, d := range delays {
		Expect(d).To(BeNumerically(">", want[i]-stored), "retry %d", i+1)
		Expect(d).To(BeNumerically("<", want[i]+time.Millisecond+stored), "retry %d: latency_ms keeps whole milliseconds", i+1)
	}
}
