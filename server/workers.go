package server

import (
	"net/http"

	"github.com/rideapi/ride/server/pipeline"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/webhooks"
)

// newWebhookWorker wires the delivery worker from the configuration, sending with client; New
// registers it as a background task.
func newWebhookWorker(cfg Config, deps Deps, client *http.Client, metrics *pipeline.Metrics) (*webhooks.Worker, error) {
	return webhooks.NewWorker(webhooks.WorkerConfig{
		Store:  deps.Store,
		Client: client,
		Policy: webhooks.RetryPolicy{Schedule: cfg.WebhookRetrySchedule, Horizon: cfg.WebhookHorizon},
		Drain:  cfg.WebhookDrain,
		Now:    deps.Now,
		Logger: deps.Logger,
		NewAttemptID: func() string {
			return ride.NewID(prefixWebhookAttempt)
		},
		OnAttempt: func(a webhooks.Attempt) {
			metrics.WebhookDeliveries.WithLabelValues(deliveryOutcomeLabel[a.Outcome]).Inc()
		},
	})
}

// deliveryOutcomeLabel names attempt outcomes as ride_webhook_deliveries_total does.
var deliveryOutcomeLabel = map[webhooks.Outcome]string{
	webhooks.Succeeded: "delivered",
	webhooks.Pending:   "retry",
	webhooks.Failed:    "failed",
}
