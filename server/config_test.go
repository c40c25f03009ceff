package server

import (
	"strings"
	"testing"
	"time"
)

func TestConfigEstimateTTL(t *testing.T) {
	env := func(kv map[string]string) func(string) string {
		return func(k string) string { return kv[k] }
	}
	cfg, err := ConfigFromEnv(env(nil))
	if err != nil || cfg.EstimateTTL != 300*time.Second {
		t.Fatalf("default: got %v, %v; want 300s", cfg.EstimateTTL, err)
	}
	for value, want := range map[string]time.Duration{"90s": 90 * time.Second, "5m": 5 * time.Minute, "24h": 24 * time.Hour} {
		cfg, err := ConfigFromEnv(env(map[string]string{"RIDE_ESTIMATE_TTL": value}))
		if err != nil || cfg.EstimateTTL != want {
			t.Errorf("%s: got %v, %v; want %v", value, cfg.EstimateTTL, err, want)
		}
	}
	for _, value := range []string{"300", "0s", "-5s", "1500ms", "25h", "soon"} {
		_, err := ConfigFromEnv(env(map[string]string{"RIDE_ESTIMATE_TTL": value}))
		if err == nil || !strings.Contains(err.Error(), "RIDE_ESTIMATE_TTL") {
			t.Errorf("%q: got %v; want an error naming RIDE_ESTIMATE_TTL", value, err)
		}
	}
}
