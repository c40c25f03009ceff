package server

import (
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/webhooks/delivery"
)

// Config is the whole configuration of the server, read once from the environment.
type Config struct {
	// Addr is where the HTTP server listens (RIDE_ADDR).
	Addr string
	// DatabaseURL selects the store: empty for the embedded SQLite file ride.db,
	// sqlite://PATH, or postgres://… (DATABASE_URL).
	DatabaseURL string
	// DatabasePool is how many connections to PostgreSQL the replica opens, all uses
	// together, and how many of its pool stay open while idle (RIDE_DB_MAX_CONNS,
	// RIDE_DB_MAX_IDLE_CONNS). The zero value means store.DefaultPool.
	DatabasePool store.Pool
	// DatabaseTimeout is the longest a request waits for the database, in all: for a
	// connection of the pool, to connect, and for the answers to its statements
	// (RIDE_DB_TIMEOUT); past it the request is answered 503. Zero means
	// DefaultDatabaseTimeout.
	DatabaseTimeout time.Duration
	// DatabasePooler says what stands between the replicas and PostgreSQL: "" for nothing,
	// "pgbouncer" for PgBouncer in transaction pooling (RIDE_DB_POOLER), which then needs
	// DatabaseDirectURL.
	DatabasePooler string
	// DatabaseDirectURL reaches the primary without a pooler, for the connection that listens
	// for notifications and for migrations (DATABASE_DIRECT_URL); empty for DatabaseURL.
	DatabaseDirectURL string
	// DatabaseStandbyURLs are streaming standbys of the primary that serve reads
	// (DATABASE_STANDBY_URLS, comma-separated), and StandbyMaxLag the lag past which one is
	// skipped (RIDE_DB_STANDBY_MAX_LAG; zero means store.DefaultStandbyMaxLag).
	DatabaseStandbyURLs []string
	StandbyMaxLag       time.Duration
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

	// RateLimitRead and RateLimitWrite are each API key's budgets in requests per
	// RateLimitPeriod (RIDE_RATE_LIMIT_READ, RIDE_RATE_LIMIT_WRITE); a bucket holds twice its
	// rate. Zero turns that limit off, so the zero Config (which tests build) has no limits.
	RateLimitRead, RateLimitWrite int
	// RateLimitPeriod is the period of those rates (RIDE_RATE_LIMIT_PERIOD): a second when
	// zero. A budget per minute or per hour refills slowly and evenly over that time.
	RateLimitPeriod time.Duration
	// RedisURL shares the rate-limit buckets between replicas through Redis (REDIS_URL);
	// empty keeps them in the process.
	RedisURL string
	// RateLimitKeyPrefix namespaces the buckets in Redis ("ride:" when empty). Not read from
	// the environment; tests set a unique one so that runs sharing a Redis never meet.
	RateLimitKeyPrefix string

	// LiveHeartbeat is how often an idle trip stream sends a comment, so that proxies keep it
	// open. Not read from the environment; tests shorten it. Zero means DefaultLiveHeartbeat.
	LiveHeartbeat time.Duration
	// GraphQLInitTimeout is how long a GraphQL socket may stay open without connection_init.
	// Not read from the environment; tests shorten it. Zero means the protocol's 10 s.
	GraphQLInitTimeout time.Duration
	// MaxSessions is how many trip streams and GraphQL sockets the replica holds open at
	// once, all accounts together; past it a stream is answered 503 and a socket closes with
	// 1013. Not read from the environment (it follows the process's connection bound); tests
	// lower it. Zero means auth.DefaultMaxSessions.
	MaxSessions int

	// WebhookInsecure allows plain-http webhook URLs and every address, loopback and private
	// ones included, for development and tests (RIDE_WEBHOOK_INSECURE).
	WebhookInsecure bool
	// WebhookRetrySchedule is the wait after each failed delivery attempt; the last entry
	// repeats (RIDE_WEBHOOK_RETRY_SCHEDULE). Empty means delivery.DefaultSchedule.
	WebhookRetrySchedule []time.Duration
	// WebhookHorizon is how long after its event a delivery is retried (RIDE_WEBHOOK_HORIZON).
	// Zero means delivery.DefaultHorizon.
	WebhookHorizon time.Duration
	// WebhookDrain is how long delivery attempts in flight may finish when the server stops.
	// Not read from the environment; tests shorten it. Zero means webhooks' default (the
	// attempt timeout plus 2 s), inside the 20 s shutdown window.
	WebhookDrain time.Duration
	// WebhookTimeout bounds one delivery attempt. Not read from the environment (the contract
	// fixes 10 s); tests shorten it. Zero means delivery.DefaultTimeout.
	WebhookTimeout time.Duration
}

// DefaultEstimateTTL is the fare estimate lifetime of the contract: five minutes, long enough to
// decide, short enough that prices stay current.
const DefaultEstimateTTL = 300 * time.Second

// DefaultDatabaseTimeout bounds a request's wait for the database: no statement of the
// service comes near it, and a database that stopped answering costs a request this long.
const DefaultDatabaseTimeout = store.DefaultReadTimeout

// DefaultLiveHeartbeat is the heartbeat of trip streams: well inside the minute after which
// common proxies close an idle connection.
const DefaultLiveHeartbeat = 15 * time.Second

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
	{Name: "RIDE_DB_MAX_CONNS", Default: "10", Meaning: "PostgreSQL connections of this replica, all uses together: 1 listens, 1 probes, 2 write positions and delivery attempts, the rest (6) serve requests; 8 replicas fit a default max_connections of 100"},
	{Name: "RIDE_DB_MAX_IDLE_CONNS", Default: "(all of the pool: 6)", Meaning: "connections of the pool kept open while idle (0 to RIDE_DB_MAX_CONNS minus 4)"},
	{Name: "RIDE_DB_TIMEOUT", Default: "5s", Meaning: "the longest a request waits for the database in all (a pooled connection, connecting, answers), then 503 (1s to 60s)"},
	{Name: "RIDE_DB_POOLER", Default: "(unset: none)", Meaning: "pgbouncer: DATABASE_URL leads to PgBouncer in transaction pooling (statements are not prepared); needs DATABASE_DIRECT_URL"},
	{Name: "DATABASE_DIRECT_URL", Default: "(unset: DATABASE_URL)", Meaning: "postgres://… straight to the primary, for listening to notifications and for migrations", Secret: true},
	{Name: "DATABASE_STANDBY_URLS", Default: "(unset: none)", Meaning: "comma-separated postgres://… of streaming standbys that serve reads; a caller always reads its own writes", Secret: true},
	{Name: "RIDE_DB_STANDBY_MAX_LAG", Default: "10s", Meaning: "a standby further behind the primary is skipped, its reads served by the primary (100ms to 1h)"},
	{Name: "RIDE_DEMO_DATA", Default: "true", Meaning: "seed demo data into an empty database and print a key of each role"},
	{Name: "RIDE_CURSOR_SECRET", Default: "(random per process, with a warning)", Meaning: "HMAC key of list cursors; set it when running replicas", Secret: true},
	{Name: "RIDE_ESTIMATE_TTL", Default: "300s", Meaning: "fare estimate lifetime (whole seconds, 1s to 24h)"},
	{Name: "RIDE_IDEMPOTENCY_TTL", Default: "24h", Meaning: "how long Idempotency-Key answers are kept and replayed (24h to 72h)"},
	{Name: "RIDE_RATE_LIMIT_READ", Default: "100", Meaning: "reads (GET, HEAD, GraphQL) per second per API key, burst twice that; 0 turns the limit off"},
	{Name: "RIDE_RATE_LIMIT_WRITE", Default: "20", Meaning: "writes (POST, PUT, DELETE; fare estimates too) per second per API key, burst twice that; 0 turns the limit off"},
	{Name: "RIDE_RATE_LIMIT_PERIOD", Default: "1s", Meaning: "the period of both rates, from 1s to 24h: with 1m, RIDE_RATE_LIMIT_READ=100 is 100 reads a minute"},
	{Name: "REDIS_URL", Default: "(unset: buckets kept in the process)", Meaning: "redis://[:password@]host:port[/db] shares rate-limit buckets between replicas", Secret: true},
	{Name: "RIDE_WEBHOOK_INSECURE", Default: "false", Meaning: "allow plain-http and loopback/private webhook URLs (development, tests)"},
	{Name: "RIDE_WEBHOOK_RETRY_SCHEDULE", Default: "1m,5m,30m,2h,5h,10h", Meaning: "waits between delivery attempts; the last repeats until the horizon"},
	{Name: "RIDE_WEBHOOK_HORIZON", Default: "24h", Meaning: "give up on a delivery this long after its event (1m to 720h)"},
}

// Defaults of the rate limits, in requests per second per API key.
const (
	DefaultRateLimitRead  = 100
	DefaultRateLimitWrite = 20
)

// PoolerPgBouncer is RIDE_DB_POOLER's value for PgBouncer in transaction pooling.
const PoolerPgBouncer = "pgbouncer"

// StoreOptions are the options of store.Open that this configuration sets: the pool and the
// bound of a wait for the database.
func (c Config) StoreOptions() []store.Option {
	opts := []store.Option{store.WithReadTimeout(c.databaseTimeout()), store.WithPool(c.pool())}
	if c.DatabasePooler == PoolerPgBouncer {
		opts = append(opts, store.ThroughPgBouncer())
	}
	if c.DatabaseDirectURL != "" {
		opts = append(opts, store.WithDirectURL(c.DatabaseDirectURL))
	}
	if len(c.DatabaseStandbyURLs) > 0 {
		opts = append(opts, store.WithStandbys(c.DatabaseStandbyURLs, c.StandbyMaxLag))
	}
	return opts
}

func (c Config) databaseTimeout() time.Duration {
	return orDefault(c.DatabaseTimeout, DefaultDatabaseTimeout)
}

// LogValue is the resolved configuration as the startup log shows it, one member per
// variable, with passwords and secrets masked: logging a Config can never leak them.
func (c Config) LogValue() slog.Value {
	database := "(embedded SQLite file " + store.DefaultSQLitePath + ")"
	if c.DatabaseURL != "" {
		database = maskURL(c.DatabaseURL)
	}
	cursorSecret := "(set, masked)"
	if c.CursorSecretGenerated {
		cursorSecret = "(random per process)"
	}
	redisURL := "(unset: buckets kept in the process)"
	if c.RedisURL != "" {
		redisURL = maskURL(c.RedisURL)
	}
	pooler, direct, standbys := "(none)", "(DATABASE_URL)", "(none)"
	if c.DatabasePooler != "" {
		pooler = c.DatabasePooler
	}
	if c.DatabaseDirectURL != "" {
		direct = maskURL(c.DatabaseDirectURL)
	}
	if len(c.DatabaseStandbyURLs) > 0 {
		masked := make([]string, len(c.DatabaseStandbyURLs))
		for i, u := range c.DatabaseStandbyURLs {
			masked[i] = maskURL(u)
		}
		standbys = strings.Join(masked, ",")
	}
	return slog.GroupValue(
		slog.String("RIDE_ADDR", c.Addr),
		slog.String("DATABASE_URL", database),
		slog.String("RIDE_DB_POOLER", pooler),
		slog.String("DATABASE_DIRECT_URL", direct),
		slog.String("DATABASE_STANDBY_URLS", standbys),
		slog.String("RIDE_DB_STANDBY_MAX_LAG", orDefault(c.StandbyMaxLag, store.DefaultStandbyMaxLag).String()),
		slog.String("RIDE_DB_MAX_CONNS", poolText(c.pool())),
		slog.Int("RIDE_DB_MAX_IDLE_CONNS", c.pool().MaxIdleConns),
		slog.String("RIDE_DB_TIMEOUT", c.databaseTimeout().String()),
		slog.Bool("RIDE_DEMO_DATA", c.DemoData),
		slog.String("RIDE_CURSOR_SECRET", cursorSecret),
		slog.String("RIDE_ESTIMATE_TTL", c.EstimateTTL.String()),
		slog.String("RIDE_IDEMPOTENCY_TTL", c.IdempotencyTTL.String()),
		slog.String("RIDE_RATE_LIMIT_READ", rateLimitText(c.RateLimitRead, c.RateLimitPeriod)),
		slog.String("RIDE_RATE_LIMIT_WRITE", rateLimitText(c.RateLimitWrite, c.RateLimitPeriod)),
		slog.String("RIDE_RATE_LIMIT_PERIOD", orDefault(c.RateLimitPeriod, time.Second).String()),
		slog.String("REDIS_URL", redisURL),
		slog.Bool("RIDE_WEBHOOK_INSECURE", c.WebhookInsecure),
		slog.String("RIDE_WEBHOOK_RETRY_SCHEDULE", scheduleText(c.WebhookRetrySchedule)),
		slog.String("RIDE_WEBHOOK_HORIZON", orDefault(c.WebhookHorizon, delivery.DefaultHorizon).String()),
	)
}

// poolText shows the connections in effect.
func poolText(p store.Pool) string {
	return fmt.Sprintf("%d (%d in the pool)", p.MaxConns, p.PoolSize())
}

// pool is the pool in effect.
func (c Config) pool() store.Pool {
	if c.DatabasePool == (store.Pool{}) {
		return store.DefaultPool
	}
	return c.DatabasePool
}

// scheduleText shows the retry schedule in effect, the default when none is configured.
func scheduleText(schedule []time.Duration) string {
	if len(schedule) == 0 {
		schedule = delivery.DefaultSchedule
	}
	parts := make([]string, len(schedule))
	for i, d := range schedule {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func rateLimitText(perPeriod int, period time.Duration) string {
	if perPeriod <= 0 {
		return "off"
	}
	if period <= 0 || period == time.Second {
		return fmt.Sprintf("%d/s, burst %d", perPeriod, 2*perPeriod)
	}
	return fmt.Sprintf("%d per %s, burst %d", perPeriod, period, 2*perPeriod)
}

// maskURL hides the password of a URL's user info and of any password-like query parameter
// (PostgreSQL URLs may carry password=…). A URL that does not parse is hidden whole, since
// where its password sits is unknown.
func maskURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable, masked)"
	}
	if q := u.Query(); len(q) > 0 {
		changed := false
		for name := range q {
			lower := strings.ToLower(name)
			if strings.Contains(lower, "password") || strings.Contains(lower, "secret") || lower == "sslkey" {
				q[name] = []string{"xxxxx"}
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	return u.Redacted()
}
