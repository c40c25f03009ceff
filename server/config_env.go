package server

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/webhooks/delivery"
)

// Bounds of RIDE_DB_TIMEOUT and RIDE_DB_MAX_CONNS.
const (
	minDatabaseTimeout = time.Second
	maxDatabaseTimeout = time.Minute
	maxDatabaseConns   = 10_000
)

// maxEstimateTTL bounds RIDE_ESTIMATE_TTL: an upfront price a day old says little about traffic.
const maxEstimateTTL = 24 * time.Hour

// minWebhookHorizon is the shortest RIDE_WEBHOOK_HORIZON: longer than an attempt's lease
// (delivery.DefaultTimeout and 30 s), with room for the attempt that takes over.
const minWebhookHorizon = time.Minute

// maxRateLimit bounds a configured rate; beyond it a typo is likelier than a wish.
const maxRateLimit = 1_000_000

// ConfigFromEnv reads and validates the configuration; errors name the variable at fault.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := Config{Addr: ":8080", DemoData: true, EstimateTTL: DefaultEstimateTTL, IdempotencyTTL: DefaultIdempotencyTTL,
		RateLimitRead: DefaultRateLimitRead, RateLimitWrite: DefaultRateLimitWrite}
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
	cfg.DatabasePool, errs = databasePool(getenv, errs)
	if v := getenv("RIDE_DB_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < minDatabaseTimeout || d > maxDatabaseTimeout {
			errs = append(errs, fmt.Errorf("RIDE_DB_TIMEOUT must be a duration from 1s to 60s, such as 5s, not %q", v))
		} else {
			cfg.DatabaseTimeout = d
		}
	}
	errs = databaseTopology(getenv, &cfg, errs)
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
	for _, limit := range []struct {
		name string
		into *int
	}{{"RIDE_RATE_LIMIT_READ", &cfg.RateLimitRead}, {"RIDE_RATE_LIMIT_WRITE", &cfg.RateLimitWrite}} {
		v := getenv(limit.name)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 || n > maxRateLimit {
			errs = append(errs, fmt.Errorf("%s must be a whole number of requests per second from 0 (off) to %d, not %q", limit.name, maxRateLimit, v))
			continue
		}
		*limit.into = n
	}
	if v := getenv("RIDE_RATE_LIMIT_PERIOD"); v != "" {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d < time.Second || d > 24*time.Hour || d%time.Second != 0 {
			errs = append(errs, fmt.Errorf("RIDE_RATE_LIMIT_PERIOD must be whole seconds from 1s to 24h (e.g. 1m), not %q", v))
		} else {
			cfg.RateLimitPeriod = d
		}
	}
	if v := getenv("REDIS_URL"); v != "" {
		// The parser's own message may quote the URL, password and all: name the form instead.
		if _, err := redis.ParseURL(v); err != nil {
			errs = append(errs, errors.New("REDIS_URL must be redis://[user:password@]host:port[/db] or rediss://…"))
		}
		cfg.RedisURL = v
	}
	if v := getenv("RIDE_WEBHOOK_INSECURE"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("RIDE_WEBHOOK_INSECURE must be true or false, not %q", v))
		}
		cfg.WebhookInsecure = b
	}
	if v := getenv("RIDE_WEBHOOK_RETRY_SCHEDULE"); v != "" {
		schedule, err := delivery.ParseSchedule(v)
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
		case d < minWebhookHorizon || d > delivery.DefaultRetention:
			// Beyond the retention, an event could be purged while its deliveries still retry;
			// within an attempt's lease (the attempt timeout and 30 s), an attempt cut off by
			// a crash could never be taken over.
			errs = append(errs, fmt.Errorf("RIDE_WEBHOOK_HORIZON must be from %s (longer than an attempt's 40 s lease, after which an attempt cut off by a crash is retried) to %s (the event retention), not %s",
				minWebhookHorizon, delivery.DefaultRetention, d))
		}
		cfg.WebhookHorizon = d
	}
	return cfg, errors.Join(errs...)
}

// databasePool reads RIDE_DB_MAX_CONNS and RIDE_DB_MAX_IDLE_CONNS: by default the idle
// connections are the whole pool.
func databasePool(getenv func(string) string, errs []error) (store.Pool, []error) {
	pool := store.DefaultPool
	if v := getenv("RIDE_DB_MAX_CONNS"); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < store.MinPoolConns || n > maxDatabaseConns {
			return pool, append(errs, fmt.Errorf("RIDE_DB_MAX_CONNS must be a whole number of connections from %d (1 listens, 1 probes, 2 write, 1 in the pool) to %d, not %q",
				store.MinPoolConns, maxDatabaseConns, v))
		}
		pool = store.Pool{MaxConns: n, MaxIdleConns: store.Pool{MaxConns: n}.PoolSize()}
	}
	if v := getenv("RIDE_DB_MAX_IDLE_CONNS"); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 || n > pool.PoolSize() {
			return pool, append(errs, fmt.Errorf("RIDE_DB_MAX_IDLE_CONNS must be a whole number from 0 to %d (the pool of RIDE_DB_MAX_CONNS=%d), not %q",
				pool.PoolSize(), pool.MaxConns, v))
		}
		pool.MaxIdleConns = n
	}
	return pool, errs
}

// Bounds of RIDE_DB_STANDBY_MAX_LAG.
const (
	minStandbyMaxLag = 100 * time.Millisecond
	maxStandbyMaxLag = time.Hour
)

// databaseTopology reads what lies between the replicas and PostgreSQL, and its standbys.
func databaseTopology(getenv func(string) string, cfg *Config, errs []error) []error {
	postgres := strings.HasPrefix(cfg.DatabaseURL, "postgres://") || strings.HasPrefix(cfg.DatabaseURL, "postgresql://")
	isPostgresURL := func(v string) bool {
		return strings.HasPrefix(v, "postgres://") || strings.HasPrefix(v, "postgresql://")
	}
	switch v := getenv("RIDE_DB_POOLER"); v {
	case "", "none":
	case PoolerPgBouncer:
		cfg.DatabasePooler = v
		if !postgres {
			errs = append(errs, errors.New("RIDE_DB_POOLER=pgbouncer needs a postgres:// DATABASE_URL (PgBouncer's)"))
		}
	default:
		errs = append(errs, fmt.Errorf("RIDE_DB_POOLER must be pgbouncer or none, not %q", v))
	}
	if v := getenv("DATABASE_DIRECT_URL"); v != "" {
		if !isPostgresURL(v) || !postgres {
			errs = append(errs, errors.New("DATABASE_DIRECT_URL must be a postgres:// URL, beside a postgres:// DATABASE_URL"))
		}
		cfg.DatabaseDirectURL = v
	} else if cfg.DatabasePooler == PoolerPgBouncer {
		errs = append(errs, errors.New("RIDE_DB_POOLER=pgbouncer needs DATABASE_DIRECT_URL, straight to the primary: through PgBouncer in transaction pooling a LISTEN hears nothing and the migrations' lock locks nothing"))
	}
	if v := getenv("DATABASE_STANDBY_URLS"); v != "" {
		for _, u := range strings.Split(v, ",") {
			u = strings.TrimSpace(u)
			if !isPostgresURL(u) || !postgres {
				errs = append(errs, errors.New("DATABASE_STANDBY_URLS must be comma-separated postgres:// URLs, beside a postgres:// DATABASE_URL"))
				break
			}
			cfg.DatabaseStandbyURLs = append(cfg.DatabaseStandbyURLs, u)
		}
	}
	if v := getenv("RIDE_DB_STANDBY_MAX_LAG"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < minStandbyMaxLag || d > maxStandbyMaxLag {
			errs = append(errs, fmt.Errorf("RIDE_DB_STANDBY_MAX_LAG must be a duration from 100ms to 1h, such as 10s, not %q", v))
		} else {
			cfg.StandbyMaxLag = d
		}
	}
	return errs
}
