package server

import (
	"strings"
	"testing"
	"time"

	"github.com/rideapi/ride/webhooks/delivery"
)

func envOf(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestWebhookConfigDefaults(t *testing.T) {
	cfg, err := ConfigFromEnv(envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.WebhookInsecure || cfg.WebhookRetrySchedule != nil || cfg.WebhookHorizon != 0 {
		t.Fatalf("unset variables must leave the contract's defaults to the webhooks package, got %+v", cfg)
	}
	p := delivery.RetryPolicy{Schedule: cfg.WebhookRetrySchedule, Horizon: cfg.WebhookHorizon}
	if p.Delay(1) != time.Minute || p.Delay(6) != 10*time.Hour || p.Delay(99) != 10*time.Hour {
		t.Fatal("the default schedule is 1m,5m,30m,2h,5h,10h, the last repeating")
	}
}

func TestWebhookConfigFromEnv(t *testing.T) {
	cfg, err := ConfigFromEnv(envOf(map[string]string{
		"RIDE_WEBHOOK_INSECURE":       "true",
		"RIDE_WEBHOOK_RETRY_SCHEDULE": "1s, 2s,1m",
		"RIDE_WEBHOOK_HORIZON":        "90m",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.WebhookInsecure || cfg.WebhookHorizon != 90*time.Minute {
		t.Fatalf("got %+v", cfg)
	}
	if want := []time.Duration{time.Second, 2 * time.Second, time.Minute}; len(cfg.WebhookRetrySchedule) != 3 ||
		cfg.WebhookRetrySchedule[0] != want[0] || cfg.WebhookRetrySchedule[2] != want[2] {
		t.Fatalf("schedule %v, want %v", cfg.WebhookRetrySchedule, want)
	}
}

func TestWebhookConfigErrorsNameTheVariable(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"RIDE_WEBHOOK_INSECURE", "sometimes"},
		{"RIDE_WEBHOOK_RETRY_SCHEDULE", "1m,soon"},
		{"RIDE_WEBHOOK_RETRY_SCHEDULE", "1m,-5s"},
		{"RIDE_WEBHOOK_HORIZON", "a day"},
		{"RIDE_WEBHOOK_HORIZON", "0s"},
		{"RIDE_WEBHOOK_HORIZON", "1000h"},
		// Within an attempt's 40 s lease, an attempt cut off by a crash would never be retried.
		{"RIDE_WEBHOOK_HORIZON", "30s"},
	} {
		_, err := ConfigFromEnv(envOf(map[string]string{tc.name: tc.value}))
		if err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s=%q: error %v does not name the variable", tc.name, tc.value, err)
		}
	}
	if _, err := ConfigFromEnv(envOf(map[string]string{"RIDE_WEBHOOK_HORIZON": "1m"})); err != nil {
		t.Errorf("the shortest horizon is refused: %v", err)
	}
	for _, v := range []string{"RIDE_WEBHOOK_INSECURE", "RIDE_WEBHOOK_RETRY_SCHEDULE", "RIDE_WEBHOOK_HORIZON"} {
		found := false
		for _, e := range EnvVars {
			found = found || e.Name == v
		}
		if !found {
			t.Errorf("%s is missing from EnvVars (rideapi --help)", v)
		}
	}
}
