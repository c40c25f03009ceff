package tests

import (
	"net"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/webhooks"
)

var _ = ForEachEngine("Webhook delivery in secure mode", func(h *Harness) {
	It("refuses, at dial time, a host name that resolves to loopback when the delivery is made; the receiver is never called", func(ctx SpecContext) {
		// Secure mode, as in production: a retry schedule of its own keeps the harness's
		// insecure default off.
		secure := h.IsolatedHarness(ctx, testDefaults(server.Config{
			WebhookRetrySchedule: []time.Duration{time.Hour}, WebhookHorizon: 2 * time.Hour,
		}), true)
		receiver := NewReceiver(nil)
		_, port, err := net.SplitHostPort(receiver.Listener.Addr().String())
		Expect(err).NotTo(HaveOccurred())

		// The API refuses "localhost" by name when the endpoint is registered, and resolves no
		// names then (DNS may change). So the endpoint is written as a name that passed
		// registration and resolves to loopback by the time of the delivery: DNS rebinding.
		target := "https://localhost:" + port + "/hooks"
		ExpectProblem(secure.Do(Request{Method: http.MethodPost, Path: "/v1/webhook-endpoints", Key: secure.Admin,
			Body: map[string]any{"url": target, "events": []string{"trip.completed"}}}), http.StatusUnprocessableEntity, "invalid_webhook_url")
		now := time.Now().UTC().Truncate(time.Microsecond)
		endpoint, err := secure.Store.CreateWebhookEndpoint(ctx, store.WebhookEndpoint{
			ID: ride.NewID(ride.PrefixWebhookEndpoint), Account: auth.DefaultAccount, URL: target,
			EventTypes: []string{"trip.completed"}, Status: store.WebhookEnabled, Secret: webhooks.NewSecret(),
			CreatedAt: now, UpdatedAt: now,
		})
		Expect(err).NotTo(HaveOccurred())
		secure.AppendEvent("trip.completed")

		var log []map[string]any
		Eventually(func() []map[string]any { log = secure.Deliveries(endpoint.ID); return log }).
			WithTimeout(firstAttemptWithin).WithPolling(pollEvery).Should(HaveLen(1))
		Expect(log[0]).To(And(
			HaveKeyWithValue("response_status", BeNil()),
			HaveKeyWithValue("error", "refused: the URL resolves to a private, loopback, link-local or reserved address")))
		Expect(receiver.Calls()).To(BeEmpty(), "the receiver on 127.0.0.1 was never called")
		Expect(log[0]["error"]).NotTo(ContainSubstring("127.0.0.1"), "the answer names no address")
	})
})
