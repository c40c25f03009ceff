package tests

import (
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server/auth"
)

var _ = ForEachEngine("Redelivering an event", func(h *Harness) {
	redeliver := func(key, endpointID, eventID string) *Response {
		return h.Do(Request{Method: http.MethodPost, Path: "/v1/webhook-endpoints/" + endpointID + "/redeliveries", Key: key,
			Body: map[string]any{"event_id": eventID}, Header: map[string]string{"Idempotency-Key": newIdempotencyKey()}})
	}

	It("sends the event again with its id once the receiver is fixed, logged as the next attempt", func() {
		receiver, fix := NewBrokenReceiver(http.StatusBadRequest)
		id, _ := h.RegisterEndpoint(receiver.URL, "trip.completed")
		event := h.AppendEvent("trip.completed")
		Eventually(func() []map[string]any { return h.Deliveries(id) }).WithTimeout(firstAttemptWithin).WithPolling(pollEvery).
			Should(ConsistOf(And(HaveKeyWithValue("status", "failed"), HaveKeyWithValue("response_status", 400.0))))

		fix()
		res := redeliver(h.Admin, id, event.ID)
		Expect(res.Status).To(Equal(http.StatusAccepted), "%s", res.Body)
		Expect(res.JSON()).To(And(HaveKeyWithValue("event_id", event.ID), HaveKeyWithValue("endpoint_id", id),
			HaveKeyWithValue("status", "pending")))
		Eventually(func() []Call { return receiver.CallsFor(event.ID) }).WithTimeout(firstAttemptWithin).WithPolling(pollEvery).Should(HaveLen(2))
		Eventually(func() []map[string]any { return h.Deliveries(id) }).WithTimeout(firstAttemptWithin).WithPolling(pollEvery).
			Should(HaveExactElements(
				And(HaveKeyWithValue("attempt", 2.0), HaveKeyWithValue("status", "succeeded"), HaveKeyWithValue("event_id", event.ID)),
				And(HaveKeyWithValue("attempt", 1.0), HaveKeyWithValue("status", "failed"))))
	})

	It("sends an event the endpoint never had", func() {
		receiver := NewReceiver(nil)
		id, _ := h.RegisterEndpoint(receiver.URL, "trip.created")
		event := h.AppendEvent("payment.succeeded")
		Expect(redeliver(h.Admin, id, event.ID).Status).To(Equal(http.StatusAccepted))
		Eventually(func() []Call { return receiver.CallsFor(event.ID) }).WithTimeout(firstAttemptWithin).WithPolling(pollEvery).Should(HaveLen(1))
	})

	It("refuses unknown events, disabled endpoints, other accounts and roles", func() {
		receiver := NewReceiver(nil)
		id, _ := h.RegisterEndpoint(receiver.URL, "trip.created")
		event := h.AppendEvent("trip.created")
		ExpectProblem(redeliver(h.Admin, id, "evt_nosuchevent00000000000000"), http.StatusUnprocessableEntity, "event_not_found")
		ExpectProblem(redeliver(h.Admin, id, "not an id"), http.StatusUnprocessableEntity, "event_not_found")
		other := h.KeyIn(auth.RoleAdmin, "", newAccount("redeliver"))
		ExpectProblem(redeliver(other, id, event.ID), http.StatusNotFound, "not_found")
		ExpectProblem(redeliver(h.Key(auth.RoleRider, h.NewRider().ID), id, event.ID), http.StatusForbidden, "forbidden")
		Expect(h.Do(Request{Method: http.MethodPatch, Path: "/v1/webhook-endpoints/" + id, Key: h.Admin,
			Body: map[string]any{"status": "disabled"}}).Status).To(Equal(http.StatusOK))
		ExpectProblem(redeliver(h.Admin, id, event.ID), http.StatusConflict, "webhook_endpoint_disabled")
	})
})
