package tests

import (
	"encoding/json"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/webhooks"
)

var _ = ForEachEngine("Changing a webhook endpoint", func(h *Harness) {
	patch := func(key, id string, body any) *Response {
		return h.Do(Request{Method: http.MethodPatch, Path: "/v1/webhook-endpoints/" + id, Key: key, Body: body})
	}
	deliveredTo := func(r *Receiver, eventID string) func() []Call {
		return func() []Call { return r.CallsFor(eventID) }
	}

	It("moves the next attempt to the new URL and kinds, signed with the secret it had", func() {
		before, after := NewReceiver(nil), NewReceiver(nil)
		id, secret := h.RegisterEndpoint(before.URL, "trip.arriving")
		first := h.AppendEvent("trip.arriving")
		Eventually(deliveredTo(before, first.ID)).WithTimeout(firstAttemptWithin).WithPolling(pollEvery).Should(HaveLen(1))

		res := patch(h.Admin, id, map[string]any{"url": after.URL, "events": []string{"trip.cancelled"}, "description": "moved"})
		Expect(res.Status).To(Equal(http.StatusOK), "%s", res.Body)
		Expect(res.JSON()).To(And(HaveKeyWithValue("url", after.URL), HaveKeyWithValue("events", []any{"trip.cancelled"}),
			HaveKeyWithValue("description", "moved"), HaveKeyWithValue("status", "enabled"), Not(HaveKey("secret"))))
		Expect(h.GET("/v1/webhook-endpoints/"+id, h.Admin).JSON()["url"]).To(Equal(after.URL))

		cancelled, arriving := h.AppendEvent("trip.cancelled"), h.AppendEvent("trip.arriving")
		Eventually(deliveredTo(after, cancelled.ID)).WithTimeout(firstAttemptWithin).WithPolling(pollEvery).Should(HaveLen(1))
		call := after.CallsFor(cancelled.ID)[0]
		Expect(webhooks.Verify(call.Body, call.Header.Get("X-Ride-Signature"), []string{secret}, 0)).To(Succeed())
		Consistently(deliveredTo(after, arriving.ID), 300*time.Millisecond).Should(BeEmpty(), "trip.arriving is no longer a kind of it")
		Expect(before.Calls()).To(HaveLen(1))

		// An empty description removes it; what is left out stays.
		Expect(patch(h.Admin, id, map[string]any{"description": ""}).JSON()).To(And(
			HaveKeyWithValue("description", BeNil()), HaveKeyWithValue("url", after.URL)))
	})

	It("holds deliveries while disabled, the events written meanwhile included, and sends them when enabled again, after a 410 too", func() {
		receiver, fix := NewBrokenReceiver(http.StatusGone)
		id, _ := h.RegisterEndpoint(receiver.URL, "payment.failed")
		first := h.AppendEvent("payment.failed")
		Eventually(func() any { return h.GET("/v1/webhook-endpoints/"+id, h.Admin).JSON()["status"] }).
			WithTimeout(firstAttemptWithin).WithPolling(pollEvery).Should(Equal("disabled"))
		Expect(receiver.CallsFor(first.ID)).To(HaveLen(1))
		afterGone := h.AppendEvent("payment.failed") // written while the 410 keeps it disabled

		fix()
		Expect(patch(h.Admin, id, map[string]any{"status": "enabled"}).JSON()["status"]).To(Equal("enabled"))
		Eventually(deliveredTo(receiver, afterGone.ID)).WithTimeout(firstAttemptWithin).WithPolling(pollEvery).Should(HaveLen(1))
		second := h.AppendEvent("payment.failed")
		Eventually(deliveredTo(receiver, second.ID)).WithTimeout(firstAttemptWithin).WithPolling(pollEvery).Should(HaveLen(1))

		Expect(patch(h.Admin, id, map[string]any{"status": "disabled"}).JSON()["status"]).To(Equal("disabled"))
		var meanwhile []string
		for range 12 {
			meanwhile = append(meanwhile, h.AppendEvent("payment.failed").ID)
		}
		Consistently(deliveredTo(receiver, meanwhile[0]), 300*time.Millisecond).Should(BeEmpty(), "held while disabled")
		Expect(patch(h.Admin, id, map[string]any{"status": "enabled"}).JSON()["status"]).To(Equal("enabled"))
		for _, event := range meanwhile {
			Eventually(deliveredTo(receiver, event)).WithTimeout(firstAttemptWithin).WithPolling(pollEvery).Should(HaveLen(1),
				"every event written while it was disabled, once")
		}
		Expect(receiver.CallsFor(first.ID)).To(HaveLen(1), "the event answered 410 is not sent again")
	})

	It("holds a changed URL to the rules of registration", func(ctx SpecContext) {
		cfg := testConfig()
		cfg.WebhookInsecure = false
		secure := h.ServerOn(ctx, h.DatabaseURL, cfg, false)
		id, _ := h.RegisterEndpoint("https://partner.example.com/hooks", "trip.completed")
		res := secure.Do(Request{Method: http.MethodPatch, Path: "/v1/webhook-endpoints/" + id, Key: h.Admin,
			Body: map[string]any{"url": "https://10.0.0.1/hooks"}})
		ExpectProblem(res, http.StatusUnprocessableEntity, "invalid_webhook_url")
		Expect(*res.Problem().Errors).To(ContainElement(HaveField("Location", "body.url")))
		Expect(h.GET("/v1/webhook-endpoints/"+id, h.Admin).JSON()["url"]).To(Equal("https://partner.example.com/hooks"))
	})

	It("refuses what it cannot change, and other accounts and roles", func() {
		receiver := NewReceiver(nil)
		id, _ := h.RegisterEndpoint(receiver.URL, "trip.completed")
		ExpectProblem(patch(h.Admin, id, map[string]any{}), http.StatusBadRequest, "invalid_request")
		ExpectProblem(patch(h.Admin, id, map[string]any{"secret": "whsec_mine"}), http.StatusBadRequest, "invalid_request")
		ExpectProblem(patch(h.Admin, id, map[string]any{"status": "paused"}), http.StatusBadRequest, "invalid_request")
		ExpectProblem(patch(h.Admin, id, map[string]any{"events": []string{"trip.created", "trip.created"}}), http.StatusBadRequest, "invalid_request")
		ExpectProblem(patch(h.Admin, id, map[string]any{"url": "/hooks"}), http.StatusBadRequest, "invalid_request")
		ExpectProblem(patch(h.Key(auth.RoleRider, h.NewRider().ID), id, map[string]any{"status": "disabled"}), http.StatusForbidden, "forbidden")
		other := h.KeyIn(auth.RoleAdmin, "", newAccount("patch"))
		ExpectProblem(patch(other, id, map[string]any{"status": "disabled"}), http.StatusNotFound, "not_found")
		ExpectProblem(patch(h.Admin, "whe_nosuchendpoint0000000000", map[string]any{"status": "disabled"}), http.StatusNotFound, "not_found")
		Expect(h.GET("/v1/webhook-endpoints/"+id, h.Admin).JSON()).To(And(HaveKeyWithValue("status", "enabled"),
			HaveKeyWithValue("url", receiver.URL), HaveKeyWithValue("events", []any{"trip.completed"})))
	})
})

var _ = ForEachEngine("Testing a webhook endpoint", func(h *Harness) {
	ping := func(key, id string) *Response {
		return h.Do(Request{Method: http.MethodPost, Path: "/v1/webhook-endpoints/" + id + "/tests", Key: key})
	}

	It("sends a signed ping and tells what the receiver answered, without logging it", func() {
		receiver := NewReceiver(nil)
		id, secret := h.RegisterEndpoint(receiver.URL, "trip.created")
		res := ping(h.Admin, id)
		Expect(res.Status).To(Equal(http.StatusOK), "%s", res.Body)
		result := res.JSON()
		Expect(result).To(And(HaveKeyWithValue("delivered", true), HaveKeyWithValue("response_status", 200.0),
			HaveKeyWithValue("error", BeNil()), HaveKeyWithValue("latency_ms", BeNumerically(">=", 0))))
		calls := receiver.CallsFor(result["event_id"].(string))
		Expect(calls).To(HaveLen(1))
		Expect(calls[0].Header.Get("X-Ride-Event")).To(Equal("ping"))
		Expect(webhooks.Verify(calls[0].Body, calls[0].Header.Get("X-Ride-Signature"), []string{secret}, 0)).To(Succeed())
		Expect(webhooks.VerifyStandard(calls[0].Body, calls[0].Header, []string{secret}, 0)).To(Succeed())
		var body map[string]any
		Expect(json.Unmarshal(calls[0].Body, &body)).To(Succeed())
		Expect(body).To(And(HaveKeyWithValue("type", "ping"), HaveKeyWithValue("data", map[string]any{"endpoint_id": id})))
		Expect(h.Deliveries(id)).To(BeEmpty(), "a ping is not a delivery")
	})

	It("reports a failing or unreachable receiver", func() {
		failing := NewReceiver(func(Call) Answer { return Answer{Status: http.StatusServiceUnavailable} })
		id, _ := h.RegisterEndpoint(failing.URL, "trip.created")
		Expect(ping(h.Admin, id).JSON()).To(And(HaveKeyWithValue("delivered", false),
			HaveKeyWithValue("response_status", 503.0), HaveKeyWithValue("error", ContainSubstring("503"))))
		Expect(failing.Calls()).To(HaveLen(1), "sent once, never retried")

		closed := NewReceiver(nil)
		deadID, _ := h.RegisterEndpoint(closed.URL, "trip.created")
		closed.Close()
		Expect(ping(h.Admin, deadID).JSON()).To(And(HaveKeyWithValue("delivered", false),
			HaveKeyWithValue("response_status", BeNil()), HaveKeyWithValue("error", Not(BeEmpty()))))
	})

	It("is for the endpoint's account's admins", func() {
		id, _ := h.RegisterEndpoint(NewReceiver(nil).URL, "trip.created")
		ExpectProblem(ping(h.Key(auth.RoleRider, h.NewRider().ID), id), http.StatusForbidden, "forbidden")
		ExpectProblem(ping(h.KeyIn(auth.RoleAdmin, "", newAccount("ping")), id), http.StatusNotFound, "not_found")
	})
})
