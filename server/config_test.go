package server

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/store"
)

// env is a fake environment for ConfigFromEnv.
type env map[string]string

func (e env) get(name string) string { return e[name] }

var _ = Describe("ConfigFromEnv", func() {
	It("has a working default for every variable", func() {
		cfg, err := ConfigFromEnv(env{}.get)
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Addr).To(Equal(":8080"))
		Expect(cfg.DatabaseURL).To(BeEmpty())
		Expect(cfg.DemoData).To(BeTrue())
		Expect(cfg.CursorSecretGenerated).To(BeTrue())
		Expect(cfg.CursorSecret).To(HaveLen(32))
		Expect(cfg.RateLimitRead).To(Equal(100))
		Expect(cfg.RateLimitWrite).To(Equal(20))
		Expect(cfg.RedisURL).To(BeEmpty())
		Expect(cfg.EstimateTTL).To(Equal(300 * time.Second))
		Expect(cfg.IdempotencyTTL).To(Equal(24 * time.Hour))
		Expect(cfg.DatabasePool).To(Equal(store.Pool{MaxConns: 10, MaxIdleConns: 6}))
		Expect(cfg.databaseTimeout()).To(Equal(5 * time.Second))
	})

	It("reads exactly the variables EnvVars documents, so --help cannot drift", func() {
		read := map[string]bool{}
		_, _ = ConfigFromEnv(func(name string) string { read[name] = true; return "" })
		var documented, used []string
		for _, v := range EnvVars {
			documented = append(documented, v.Name)
		}
		for name := range read {
			used = append(used, name)
		}
		sort.Strings(documented)
		sort.Strings(used)
		Expect(used).To(Equal(documented))
	})

	DescribeTable("accepts",
		func(vars env, check func(Config)) {
			cfg, err := ConfigFromEnv(vars.get)
			Expect(err).NotTo(HaveOccurred())
			check(cfg)
		},
		Entry("a listen address", env{"RIDE_ADDR": "127.0.0.1:9000"}, func(c Config) { Expect(c.Addr).To(Equal("127.0.0.1:9000")) }),
		Entry("a PostgreSQL URL", env{"DATABASE_URL": "postgres://u:p@db/ride"}, func(c Config) { Expect(c.DatabaseURL).To(Equal("postgres://u:p@db/ride")) }),
		Entry("an SQLite file", env{"DATABASE_URL": "sqlite:///tmp/x.db"}, func(c Config) { Expect(c.DatabaseURL).To(Equal("sqlite:///tmp/x.db")) }),
		Entry("demo data off", env{"RIDE_DEMO_DATA": "false"}, func(c Config) { Expect(c.DemoData).To(BeFalse()) }),
		Entry("a cursor secret", env{"RIDE_CURSOR_SECRET": "0123456789abcdef"}, func(c Config) {
			Expect(string(c.CursorSecret)).To(Equal("0123456789abcdef"))
			Expect(c.CursorSecretGenerated).To(BeFalse())
		}),
		Entry("rate limits", env{"RIDE_RATE_LIMIT_READ": "7", "RIDE_RATE_LIMIT_WRITE": " 3 "}, func(c Config) {
			Expect(c.RateLimitRead).To(Equal(7))
			Expect(c.RateLimitWrite).To(Equal(3))
		}),
		Entry("rate limits off", env{"RIDE_RATE_LIMIT_READ": "0", "RIDE_RATE_LIMIT_WRITE": "0"}, func(c Config) {
			Expect(c.RateLimitRead).To(BeZero())
			Expect(c.RateLimitWrite).To(BeZero())
		}),
		Entry("a rate-limit period", env{"RIDE_RATE_LIMIT_PERIOD": "1h"}, func(c Config) { Expect(c.RateLimitPeriod).To(Equal(time.Hour)) }),
		Entry("a Redis URL", env{"REDIS_URL": "redis://:pw@127.0.0.1:6379/2"}, func(c Config) { Expect(c.RedisURL).To(Equal("redis://:pw@127.0.0.1:6379/2")) }),
		Entry("a TLS Redis URL", env{"REDIS_URL": "rediss://cache.internal:6380"}, func(c Config) { Expect(c.RedisURL).To(Equal("rediss://cache.internal:6380")) }),
		Entry("an estimate lifetime in seconds", env{"RIDE_ESTIMATE_TTL": "90s"}, func(c Config) { Expect(c.EstimateTTL).To(Equal(90 * time.Second)) }),
		Entry("an estimate lifetime in minutes", env{"RIDE_ESTIMATE_TTL": "5m"}, func(c Config) { Expect(c.EstimateTTL).To(Equal(5 * time.Minute)) }),
		Entry("the longest estimate lifetime", env{"RIDE_ESTIMATE_TTL": "24h"}, func(c Config) { Expect(c.EstimateTTL).To(Equal(24 * time.Hour)) }),
		Entry("an idempotency retention", env{"RIDE_IDEMPOTENCY_TTL": "48h"}, func(c Config) { Expect(c.IdempotencyTTL).To(Equal(48 * time.Hour)) }),
		Entry("a pool, kept whole while idle", env{"RIDE_DB_MAX_CONNS": "25"}, func(c Config) {
			Expect(c.DatabasePool).To(Equal(store.Pool{MaxConns: 25, MaxIdleConns: 21}))
		}),
		Entry("a pool and its idle connections", env{"RIDE_DB_MAX_CONNS": "6", "RIDE_DB_MAX_IDLE_CONNS": "0"}, func(c Config) {
			Expect(c.DatabasePool).To(Equal(store.Pool{MaxConns: 6, MaxIdleConns: 0}))
		}),
		Entry("a database timeout", env{"RIDE_DB_TIMEOUT": "2s"}, func(c Config) { Expect(c.DatabaseTimeout).To(Equal(2 * time.Second)) }),
		Entry("PgBouncer, with the primary straight", env{"DATABASE_URL": "postgres://u@bouncer:6432/ride", "RIDE_DB_POOLER": "pgbouncer",
			"DATABASE_DIRECT_URL": "postgres://u@primary:5432/ride"}, func(c Config) {
			Expect(c.DatabasePooler).To(Equal(PoolerPgBouncer))
			Expect(c.DatabaseDirectURL).To(Equal("postgres://u@primary:5432/ride"))
			Expect(c.StoreOptions()).To(HaveLen(4))
		}),
		Entry("standbys and their lag bound", env{"DATABASE_URL": "postgres://u@primary/ride",
			"DATABASE_STANDBY_URLS": "postgres://u@standby1/ride, postgres://u@standby2/ride", "RIDE_DB_STANDBY_MAX_LAG": "2s"}, func(c Config) {
			Expect(c.DatabaseStandbyURLs).To(Equal([]string{"postgres://u@standby1/ride", "postgres://u@standby2/ride"}))
			Expect(c.StandbyMaxLag).To(Equal(2 * time.Second))
		}),
	)

	DescribeTable("rejects, naming the variable and never echoing a secret",
		func(vars env, variable string) {
			_, err := ConfigFromEnv(vars.get)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(variable))
			Expect(err.Error()).NotTo(ContainSubstring("hunter2"))
		},
		Entry("an unknown database scheme", env{"DATABASE_URL": "mysql://u:hunter2@db/ride"}, "DATABASE_URL"),
		Entry("a non-boolean demo flag", env{"RIDE_DEMO_DATA": "sometimes"}, "RIDE_DEMO_DATA"),
		Entry("a short cursor secret", env{"RIDE_CURSOR_SECRET": "hunter2"}, "RIDE_CURSOR_SECRET"),
		Entry("a negative read limit", env{"RIDE_RATE_LIMIT_READ": "-1"}, "RIDE_RATE_LIMIT_READ"),
		Entry("a fractional write limit", env{"RIDE_RATE_LIMIT_WRITE": "2.5"}, "RIDE_RATE_LIMIT_WRITE"),
		Entry("a write limit with units", env{"RIDE_RATE_LIMIT_WRITE": "20/s"}, "RIDE_RATE_LIMIT_WRITE"),
		Entry("an absurd read limit", env{"RIDE_RATE_LIMIT_READ": "1000000000"}, "RIDE_RATE_LIMIT_READ"),
		Entry("a rate-limit period under a second", env{"RIDE_RATE_LIMIT_PERIOD": "500ms"}, "RIDE_RATE_LIMIT_PERIOD"),
		Entry("a rate-limit period over a day", env{"RIDE_RATE_LIMIT_PERIOD": "48h"}, "RIDE_RATE_LIMIT_PERIOD"),
		Entry("a rate-limit period without a unit", env{"RIDE_RATE_LIMIT_PERIOD": "60"}, "RIDE_RATE_LIMIT_PERIOD"),
		Entry("a Redis URL of another scheme", env{"REDIS_URL": "http://:hunter2@cache:6379"}, "REDIS_URL"),
		Entry("a Redis URL with a bad database", env{"REDIS_URL": "redis://:hunter2@cache:6379/x"}, "REDIS_URL"),
		Entry("an estimate lifetime without a unit", env{"RIDE_ESTIMATE_TTL": "300"}, "RIDE_ESTIMATE_TTL"),
		Entry("a zero estimate lifetime", env{"RIDE_ESTIMATE_TTL": "0s"}, "RIDE_ESTIMATE_TTL"),
		Entry("a negative estimate lifetime", env{"RIDE_ESTIMATE_TTL": "-5s"}, "RIDE_ESTIMATE_TTL"),
		Entry("an estimate lifetime in part-seconds", env{"RIDE_ESTIMATE_TTL": "1500ms"}, "RIDE_ESTIMATE_TTL"),
		Entry("an estimate lifetime over a day", env{"RIDE_ESTIMATE_TTL": "25h"}, "RIDE_ESTIMATE_TTL"),
		Entry("an estimate lifetime in words", env{"RIDE_ESTIMATE_TTL": "soon"}, "RIDE_ESTIMATE_TTL"),
		Entry("an idempotency retention under a day", env{"RIDE_IDEMPOTENCY_TTL": "1h"}, "RIDE_IDEMPOTENCY_TTL"),
		Entry("an idempotency retention over three days", env{"RIDE_IDEMPOTENCY_TTL": "96h"}, "RIDE_IDEMPOTENCY_TTL"),
		Entry("a pool too small for the side connections", env{"RIDE_DB_MAX_CONNS": "4"}, "RIDE_DB_MAX_CONNS"),
		Entry("a pool in words", env{"RIDE_DB_MAX_CONNS": "many"}, "RIDE_DB_MAX_CONNS"),
		Entry("more idle connections than the pool holds", env{"RIDE_DB_MAX_CONNS": "8", "RIDE_DB_MAX_IDLE_CONNS": "5"}, "RIDE_DB_MAX_IDLE_CONNS"),
		Entry("negative idle connections", env{"RIDE_DB_MAX_IDLE_CONNS": "-1"}, "RIDE_DB_MAX_IDLE_CONNS"),
		Entry("a database timeout without a unit", env{"RIDE_DB_TIMEOUT": "5"}, "RIDE_DB_TIMEOUT"),
		Entry("a database timeout under a second", env{"RIDE_DB_TIMEOUT": "500ms"}, "RIDE_DB_TIMEOUT"),
		Entry("a database timeout over a minute", env{"RIDE_DB_TIMEOUT": "2m"}, "RIDE_DB_TIMEOUT"),
		Entry("an unknown pooler", env{"DATABASE_URL": "postgres://u:hunter2@db/ride", "RIDE_DB_POOLER": "pgpool"}, "RIDE_DB_POOLER"),
		Entry("PgBouncer without a direct URL, where LISTEN would hear nothing", env{"DATABASE_URL": "postgres://u:hunter2@bouncer/ride", "RIDE_DB_POOLER": "pgbouncer"}, "DATABASE_DIRECT_URL"),
		Entry("PgBouncer in front of SQLite", env{"RIDE_DB_POOLER": "pgbouncer", "DATABASE_DIRECT_URL": "postgres://u:hunter2@db/ride"}, "RIDE_DB_POOLER"),
		Entry("a direct URL of another scheme", env{"DATABASE_URL": "postgres://u:hunter2@db/ride", "DATABASE_DIRECT_URL": "mysql://u:hunter2@db/ride"}, "DATABASE_DIRECT_URL"),
		Entry("standbys beside SQLite", env{"DATABASE_STANDBY_URLS": "postgres://u:hunter2@standby/ride"}, "DATABASE_STANDBY_URLS"),
		Entry("a standby that is not PostgreSQL", env{"DATABASE_URL": "postgres://u:hunter2@db/ride", "DATABASE_STANDBY_URLS": "postgres://u@s1/ride,sqlite://x"}, "DATABASE_STANDBY_URLS"),
		Entry("a lag bound without a unit", env{"RIDE_DB_STANDBY_MAX_LAG": "10"}, "RIDE_DB_STANDBY_MAX_LAG"),
		Entry("a lag bound over an hour", env{"RIDE_DB_STANDBY_MAX_LAG": "2h"}, "RIDE_DB_STANDBY_MAX_LAG"),
	)

	It("reports every invalid variable at once", func() {
		_, err := ConfigFromEnv(env{"RIDE_DEMO_DATA": "maybe", "RIDE_RATE_LIMIT_READ": "x", "REDIS_URL": "nope"}.get)
		Expect(err).To(MatchError(And(ContainSubstring("RIDE_DEMO_DATA"), ContainSubstring("RIDE_RATE_LIMIT_READ"), ContainSubstring("REDIS_URL"))))
	})
})

var _ = Describe("the logged configuration", func() {
	logged := func(cfg Config) map[string]any {
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("configuration", "config", cfg)
		var line struct{ Config map[string]any }
		Expect(json.Unmarshal(buf.Bytes(), &line)).To(Succeed(), buf.String())
		Expect(buf.String()).NotTo(ContainSubstring("hunter2"))
		return line.Config
	}

	It("names every variable", func() {
		cfg, err := ConfigFromEnv(env{}.get)
		Expect(err).NotTo(HaveOccurred())
		got := logged(cfg)
		for _, v := range EnvVars {
			Expect(got).To(HaveKey(v.Name))
		}
		Expect(got).To(HaveKeyWithValue("RIDE_RATE_LIMIT_READ", "100/s, burst 200"))
		Expect(got).To(HaveKeyWithValue("RIDE_CURSOR_SECRET", "(random per process)"))
	})

	DescribeTable("masks secrets",
		func(vars env, variable, want string) {
			cfg, err := ConfigFromEnv(vars.get)
			Expect(err).NotTo(HaveOccurred())
			Expect(logged(cfg)).To(HaveKeyWithValue(variable, want))
		},
		Entry("the database password", env{"DATABASE_URL": "postgres://ride:hunter2@db:5432/ride?sslmode=require"}, "DATABASE_URL", "postgres://ride:xxxxx@db:5432/ride?sslmode=require"),
		Entry("a database password given as a parameter", env{"DATABASE_URL": "postgres://ride@db/ride?password=hunter2"}, "DATABASE_URL", "postgres://ride@db/ride?password=xxxxx"),
		Entry("nothing of a URL without a password", env{"DATABASE_URL": "postgres://ride@db/ride"}, "DATABASE_URL", "postgres://ride@db/ride"),
		Entry("the cursor secret", env{"RIDE_CURSOR_SECRET": "hunter2-hunter2-hunter2"}, "RIDE_CURSOR_SECRET", "(set, masked)"),
		Entry("the Redis password", env{"REDIS_URL": "redis://:hunter2@cache:6379/0"}, "REDIS_URL", "redis://:xxxxx@cache:6379/0"),
		Entry("the Redis user's password", env{"REDIS_URL": "rediss://app:hunter2@cache:6380"}, "REDIS_URL", "rediss://app:xxxxx@cache:6380"),
		Entry("rate limits turned off", env{"RIDE_RATE_LIMIT_WRITE": "0"}, "RIDE_RATE_LIMIT_WRITE", "off"),
	)

	It("hides a URL it cannot parse whole", func() {
		Expect(maskURL("postgres://u:hunter2@db:port/x")).NotTo(ContainSubstring("hunter2"))
		Expect(strings.Contains(maskURL("::not a url"), "::")).To(BeFalse())
	})
})
