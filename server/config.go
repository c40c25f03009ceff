package server

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
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
	// EstimateTTL is how long a fare estimate can be booked (RIDE_ESTIMATE_TTL), whole seconds
	// between 1 s and 24 h. Zero means DefaultEstimateTTL.
	EstimateTTL time.Duration

	// IdempotencyTTL is how long the answer stored for an Idempotency-Key is kept and replayed
	// before the record is purged and the key is new again (RIDE_IDEMPOTENCY_TTL, 24h–72h).
	// Zero means DefaultIdempotencyTTL.
	IdempotencyTTL time.Duration
}

// DefaultEstimateTTL is the fare estimate lifetime of the contract: five minutes, long enough to
// decide, short enough that prices stay current.
const DefaultEstimateTTL = 300 * time.Second

// maxEstimateTTL bounds RIDE_ESTIMATE_TTL: an upfront price a day old says little about traffic.
const maxEstimateTTL = 24 * time.Hour

// Bounds of RIDE_IDEMPOTENCY_TTL: long enough for a client's retries over a day, short enough
// that the table stays small.
const (
	DefaultIdempotencyTTL = 24 * time.Hour
	MinIdempotencyTTL     = 24 * time.Hour
	MaxIdempotencyTTL     = 72 * time.Hour
)

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
	{Name: "RIDE_ESTIMATE_TTL", Default: "300s", Meaning: "fare estimate lifetime (whole seconds, 1s to 24h)"},
	{Name: "RIDE_IDEMPOTENCY_TTL", Default: "24h", Meaning: "how long Idempotency-Key answers are kept and replayed (24h to 72h)"},
}

// ConfigFromEnv reads and validates the configuration; errors name the variable at fault.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := Config{Addr: ":8080", DemoData: true, EstimateTTL: DefaultEstimateTTL, IdempotencyTTL: DefaultIdempotencyTTL}
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
	if v := getenv("RIDE_ESTIMATE_TTL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > maxEstimateTTL || d%time.Second != 0 {
			errs = append(errs, fmt.Errorf("RIDE_ESTIMATE_TTL must be a whole number of seconds between 1s and 24h, such as 300s or 5m, not %q", v))
		} else {
			cfg.EstimateTTL = d
		}
	}
	if v := getenv("RIDE_IDEMPOTENCY_TTL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < MinIdempotencyTTL || d > MaxIdempotencyTTL {
			errs = append(errs, fmt.Errorf("RIDE_IDEMPOTENCY_TTL must be a duration from %s to %s (e.g. 48h), not %q",
				"24h", "72h", v))
		} else {
			cfg.IdempotencyTTL = d
		}
	}
	return cfg, errors.Join(errs...)
}
