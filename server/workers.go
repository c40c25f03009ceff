package server

import (
	"net/http"

	"github.com/rideapi/ride/server/pipeline"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/webhooks/delivery"
)

// newWebhookWorker wires the delivery worker from the configuration, sending with client; New
// registers it as a background task.
func newWebhookWorker(cfg Config, deps Deps, client *http.Client, metrics *pipeline.Metrics) (*delivery.Worker, error) {
	return delivery.NewWorker(delivery.WorkerConfig{
		Store:  deps.Store,
		Client: client,
		Policy: delivery.RetryPolicy{Schedule: cfg.WebhookRetrySchedule, Horizon: cfg.WebhookHorizon},
		Drain:  cfg.WebhookDrain,
		Now:    deps.Now,
		Logger: deps.Logger,
		NewAttemptID: func() string {
			return ride.NewID(prefixWebhookAttempt)
		},
		OnAttempt: func(a delivery.Attempt) {
			metrics.WebhookDeliveries.WithLabelValues(deliveryOutcomeLabel[a.Outcome]).Inc()
		},
	})
}

// deliveryOutcomeLabel names attempt outcomes as ride_webhook_deliveries_total does.
var deliveryOutcomeLabel = map[delivery.Outcome]string{
	delivery.Succeeded: "delivered",
	delivery.Pending:   "retry",
	delivery.Failed:    "failed",
}
