package server

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rideapi/ride/webhooks"
)

// Config is the whole configuration of the server, read once from the environment.
type Config struct {
	// Addr is where the HTTP server listens (RIDE_ADDR).
	Addr string
	// DatabaseURL selects the store: empty for the embedded SQLite file ride.db,
	// sqlite://PATH, or postgres://… (DATABASE_URL).
	DatabaseURL string
	// DemoData seeds demo cities, drivers, riders and trips into an empty database and prints a
	// key of each role (RIDE_DEMO_DATA).
	DemoData bool
	// CursorSecret authenticates list cursors (RIDE_CURSOR_SECRET). Replicas must share it, or
	// a cursor from one is refused by another.
	CursorSecret []byte
	// CursorSecretGenerated is true when no secret was configured and a random one is used.
	CursorSecretGenerated bool
	// WebhookInsecure allows plain-http webhook URLs and every address, loopback and private
	// ones included, for development and tests (RIDE_WEBHOOK_INSECURE).
	WebhookInsecure bool
	// WebhookRetrySchedule is the wait after each failed delivery attempt; the last entry
	// repeats (RIDE_WEBHOOK_RETRY_SCHEDULE). Empty means webhooks.DefaultSchedule.
	WebhookRetrySchedule []time.Duration
	// WebhookHorizon is how long after its event a delivery is retried (RIDE_WEBHOOK_HORIZON).
	// Zero means webhooks.DefaultHorizon.
	WebhookHorizon time.Duration
	// WebhookTimeout bounds one delivery attempt. Not read from the environment (the contract
	// fixes 10 s); tests shorten it. Zero means webhooks.DefaultTimeout.
	WebhookTimeout time.Duration
}

// EnvVar documents one environment variable for --help and the startup log.
type EnvVar struct {
	Name, Default, Meaning string
	Secret                 bool
}

// EnvVars lists every variable the server reads, with its default.
var EnvVars = []EnvVar{
	{Name: "RIDE_ADDR", Default: ":8080", Meaning: "listen address"},
	{Name: "DATABASE_URL", Default: "(unset: embedded SQLite file ride.db)", Meaning: "postgres://… selects PostgreSQL; sqlite://PATH names the SQLite file", Secret: true},
	{Name: "RIDE_DEMO_DATA", Default: "true", Meaning: "seed demo data into an empty database and print a key of each role"},
	{Name: "RIDE_CURSOR_SECRET", Default: "(random per process, with a warning)", Meaning: "HMAC key of list cursors; set it when running replicas", Secret: true},
	{Name: "RIDE_WEBHOOK_INSECURE", Default: "false", Meaning: "allow plain-http and loopback/private webhook URLs (development, tests)"},
	{Name: "RIDE_WEBHOOK_RETRY_SCHEDULE", Default: "1m,5m,30m,2h,5h,10h", Meaning: "waits between delivery attempts; the last repeats until the horizon"},
	{Name: "RIDE_WEBHOOK_HORIZON", Default: "24h", Meaning: "give up on a delivery this long after its event"},
}

// ConfigFromEnv reads and validates the configuration; errors name the variable at fault.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := Config{Addr: ":8080", DemoData: true}
	var errs []error
	if v := getenv("RIDE_ADDR"); v != "" {
		cfg.Addr = v
	}
	if v := getenv("DATABASE_URL"); v != "" {
		if !strings.HasPrefix(v, "postgres://") && !strings.HasPrefix(v, "postgresql://") && !strings.HasPrefix(v, "sqlite://") {
			errs = append(errs, fmt.Errorf("DATABASE_URL must start with postgres://, postgresql:// or sqlite://"))
		}
		cfg.DatabaseURL = v
	}
	if v := getenv("RIDE_DEMO_DATA"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("RIDE_DEMO_DATA must be true or false, not %q", v))
		}
		cfg.DemoData = b
	}
	if v := getenv("RIDE_CURSOR_SECRET"); v != "" {
		if len(v) < 16 {
			errs = append(errs, errors.New("RIDE_CURSOR_SECRET must be at least 16 characters"))
		}
		cfg.CursorSecret = []byte(v)
	} else {
		cfg.CursorSecret = make([]byte, 32)
		_, _ = rand.Read(cfg.CursorSecret)
		cfg.CursorSecretGenerated = true
	}
	if v := getenv("RIDE_WEBHOOK_INSECURE"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("RIDE_WEBHOOK_INSECURE must be true or false, not %q", v))
		}
		cfg.WebhookInsecure = b
	}
	if v := getenv("RIDE_WEBHOOK_RETRY_SCHEDULE"); v != "" {
		schedule, err := webhooks.ParseSchedule(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("RIDE_WEBHOOK_RETRY_SCHEDULE must be comma-separated positive durations such as 1m,5m,30m: %w", err))
		}
		cfg.WebhookRetrySchedule = schedule
	}
	if v := getenv("RIDE_WEBHOOK_HORIZON"); v != "" {
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("RIDE_WEBHOOK_HORIZON must be a duration such as 24h, not %q", v))
		case d <= 0 || d > webhooks.DefaultRetention:
			// Beyond the retention, an event could be purged while its deliveries still retry.
			errs = append(errs, fmt.Errorf("RIDE_WEBHOOK_HORIZON must be positive and at most %s (the event retention), not %s", webhooks.DefaultRetention, d))
		}
		cfg.WebhookHorizon = d
	}
	return cfg, errors.Join(errs...)
}
