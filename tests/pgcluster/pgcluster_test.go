package pgcluster_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/tests/pgcluster"
)

// newDatabase creates a database of the spec's own on t's primary (so PgBouncer's pool of it
// serves the spec alone), and drops it after the spec.
func newDatabase(ctx context.Context, t *pgcluster.Topology) string {
	GinkgoHelper()
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	name := "spec_" + hex.EncodeToString(suffix[:])
	admin := connect(ctx, t.PrimaryURL("postgres"))
	_, err := admin.Exec(ctx, "CREATE DATABASE "+name)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		_, err := admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)")
		Expect(err).NotTo(HaveOccurred())
	})
	return name
}

// connect opens one connection for the spec, closed after it.
func connect(ctx context.Context, url string) *pgx.Conn {
	GinkgoHelper()
	conn, err := pgx.Connect(ctx, url)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// withMode is url with pgx's default_query_exec_mode set.
func withMode(url, mode string) string { return url + "&default_query_exec_mode=" + mode }

// showConfig reads PgBouncer's settings from its console.
func showConfig(ctx context.Context, t *pgcluster.Topology) map[string]string {
	GinkgoHelper()
	rows, err := connect(ctx, t.BouncerAdminURL()).Query(ctx, "SHOW CONFIG")
	Expect(err).NotTo(HaveOccurred())
	config := map[string]string{}
	for rows.Next() {
		values, err := rows.Values()
		Expect(err).NotTo(HaveOccurred())
		if key, ok := values[0].(string); ok {
			config[key], _ = values[1].(string)
		}
	}
	Expect(rows.Err()).NotTo(HaveOccurred())
	return config
}

var _ = Describe("The topology", func() {
	It("comes up from nothing: a primary, a standby streaming from it through a slot, PgBouncer in transaction pooling in front of the primary", func(ctx SpecContext) {
		t := specTopology()
		AddReportEntry("time to come up", t.StartedIn.String())

		var recovering bool
		Expect(connect(ctx, t.PrimaryURL("postgres")).QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovering)).To(Succeed())
		Expect(recovering).To(BeFalse(), "the primary takes writes")
		var slotActive bool
		Expect(connect(ctx, t.PrimaryURL("postgres")).QueryRow(ctx,
			"SELECT active FROM pg_replication_slots WHERE slot_name = 'ride_standby'").Scan(&slotActive)).To(Succeed())
		Expect(slotActive).To(BeTrue(), "the standby streams through its slot")

		standby := connect(ctx, t.StandbyURL("postgres"))
		var delay, receiver string
		Expect(standby.QueryRow(ctx, "SELECT pg_is_in_recovery(), current_setting('recovery_min_apply_delay'), "+
			"(SELECT status FROM pg_stat_wal_receiver)").Scan(&recovering, &delay, &receiver)).To(Succeed())
		Expect(recovering).To(BeTrue())
		Expect(delay).To(Equal("2s"))
		Expect(receiver).To(Equal("streaming"))

		config := showConfig(ctx, t)
		Expect(config).To(HaveKeyWithValue("pool_mode", "transaction"))
		Expect(config).To(HaveKeyWithValue("default_pool_size", "20"))
		var port int
		Expect(connect(ctx, t.BouncerURL("postgres")).QueryRow(ctx, "SELECT inet_server_port()").Scan(&port)).To(Succeed())
		Expect(port).To(Equal(t.PrimaryPort), "PgBouncer leads to the primary")
	})

	It("has a standby that replays a commit no sooner than the apply delay after it, and then does", SpecTimeout(2*time.Minute), func(ctx SpecContext) {
		t := specTopology()
		db := newDatabase(ctx, t)
		primary := connect(ctx, t.PrimaryURL(db))
		_, err := primary.Exec(ctx, "CREATE TABLE probes (id int PRIMARY KEY, written_at timestamptz NOT NULL)")
		Expect(err).NotTo(HaveOccurred())
		Expect(t.CaughtUp(ctx)).To(Succeed(), "the table is on the standby")
		standby := connect(ctx, t.StandbyURL(db))

		// A commit reaches the standby no sooner than ApplyDelay after it, by the host's one
		// clock. written_at is read before the commit and asOf after the standby took its
		// snapshot, so a snapshot taken before written_at + ApplyDelay cannot hold the row:
		// that holds however slow the host is. A look too late to tell is made again with
		// another row.
		var (
			written, asOf time.Time
			found         bool
			id            int
		)
		for id = 1; id <= 10; id++ {
			Expect(primary.QueryRow(ctx, "INSERT INTO probes VALUES ($1, clock_timestamp()) RETURNING written_at", id).Scan(&written)).To(Succeed())
			Expect(standby.QueryRow(ctx, "SELECT EXISTS (SELECT FROM probes WHERE id = $1), clock_timestamp()", id).Scan(&found, &asOf)).To(Succeed())
			if asOf.Before(written.Add(t.ApplyDelay)) {
				break
			}
		}
		Expect(asOf.Before(written.Add(t.ApplyDelay))).To(BeTrue(), "ten looks at the standby each came %s or more after their write", t.ApplyDelay)
		Expect(found).To(BeFalse(), "the standby holds a row written %s before, under an apply delay of %s", asOf.Sub(written), t.ApplyDelay)

		var seenAt time.Time
		Eventually(func(g Gomega) {
			g.Expect(standby.QueryRow(ctx, "SELECT EXISTS (SELECT FROM probes WHERE id = $1), clock_timestamp()", id).Scan(&found, &seenAt)).To(Succeed())
			g.Expect(found).To(BeTrue())
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
		Expect(seenAt.Sub(written)).To(BeNumerically(">=", t.ApplyDelay), "seen on the standby %s after its write", seenAt.Sub(written))
		AddReportEntry("a commit first seen on the standby after", seenAt.Sub(written).String())
	})

	It("has PgBouncer serve many client connections on few server connections, a transaction at a time", func(ctx SpecContext) {
		t := specTopology()
		db := newDatabase(ctx, t)
		// In session pooling the 21st client would wait for one of the first 20 to disconnect.
		clients := 3 * t.PoolSize
		conns := make([]*pgx.Conn, clients)
		for i := range conns {
			conns[i] = connect(ctx, withMode(t.BouncerURL(db), "exec"))
			var one int
			Expect(conns[i].QueryRow(ctx, "SELECT 1").Scan(&one)).To(Succeed(), "client %d", i+1)
		}
		var servers int
		Expect(connect(ctx, t.PrimaryURL("postgres")).QueryRow(ctx,
			"SELECT count(*) FROM pg_stat_activity WHERE datname = $1", db).Scan(&servers)).To(Succeed())
		Expect(servers).To(And(BeNumerically(">=", 1), BeNumerically("<=", t.PoolSize)), "%d clients connected", clients)
	})

	Describe("through PgBouncer, pgx's ways of running a statement", func() {
		const query = "SELECT $1::int + 1"

		It("break with the statement cache: two clients prepare the same statement on one server connection", func(ctx SpecContext) {
			t := specTopology()
			db := newDatabase(ctx, t)
			first := connect(ctx, withMode(t.BouncerURL(db), "cache_statement"))
			second := connect(ctx, withMode(t.BouncerURL(db), "cache_statement"))
			var n int
			Expect(first.QueryRow(ctx, query, 1).Scan(&n)).To(Succeed())
			// PgBouncer hands out its most recently used server connection (LIFO): the one
			// that holds the first client's statement, which the second one names alike.
			err := second.QueryRow(ctx, query, 1).Scan(&n)
			var pgErr *pgconn.PgError
			Expect(errors.As(err, &pgErr)).To(BeTrue(), "%v", err)
			Expect(pgErr.Code).To(Equal("42P05"), "prepared statement already exists")
		})

		It("break with describe_exec: a client's second round trip may run the statement another client described", func(ctx SpecContext) {
			t := specTopology()
			db := newDatabase(ctx, t)
			first := connect(ctx, t.BouncerURL(db))
			second := connect(ctx, t.BouncerURL(db))
			// describe_exec's two round trips, apart: the description of the unnamed
			// statement, then its execution, with another client's statement in between on the
			// same server connection.
			sd, err := first.PgConn().Prepare(ctx, "", "SELECT $1::int + 1", nil)
			Expect(err).NotTo(HaveOccurred())
			_, err = second.PgConn().Prepare(ctx, "", "SELECT $1::int * 100", nil)
			Expect(err).NotTo(HaveOccurred())
			result := first.PgConn().ExecStatement(ctx, sd, [][]byte{[]byte("2")}, nil, nil).Read()
			Expect(result.Err).NotTo(HaveOccurred())
			Expect(string(result.Rows[0][0])).To(Equal("200"), "the first client ran the second one's statement")
		})

		DescribeTable("work in the modes that send each statement whole in one round trip", func(ctx SpecContext, mode string) {
			t := specTopology()
			db := newDatabase(ctx, t)
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			for range 16 {
				conn := connect(ctx, withMode(t.BouncerURL(db), mode))
				wg.Go(func() {
					for i := range 100 {
						var n int
						if err := conn.QueryRow(ctx, query, i).Scan(&n); err != nil || n != i+1 {
							errs <- errors.Join(err, errors.New("wrong answer"))
							return
						}
						var s string
						if err := conn.QueryRow(ctx, "SELECT $1::text || 'x'", "a").Scan(&s); err != nil || s != "ax" {
							errs <- errors.Join(err, errors.New("wrong answer"))
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			Expect(errs).To(BeEmpty())
		},
			Entry("cache_describe", "cache_describe"),
			Entry("exec", "exec"),
			Entry("simple_protocol", "simple_protocol"),
		)
	})

	It("has a standby that can stop and start again mid-run: refused meanwhile, caught up after", SpecTimeout(2*time.Minute), func(ctx SpecContext) {
		t := specTopology()
		db := newDatabase(ctx, t)
		primary := connect(ctx, t.PrimaryURL(db))
		_, err := primary.Exec(ctx, "CREATE TABLE probes (id int PRIMARY KEY)")
		Expect(err).NotTo(HaveOccurred())
		Expect(t.CaughtUp(ctx)).To(Succeed())
		session := connect(ctx, t.StandbyURL(db))

		Expect(t.StopStandby(ctx, pgcluster.StopFast)).To(Succeed())
		DeferCleanup(t.StartStandby) // for the next specs, whatever happens here
		_, err = session.Exec(ctx, "SELECT 1")
		Expect(err).To(HaveOccurred(), "a session of the stopped standby")
		AddReportEntry("a session's next statement after the standby stopped", err.Error())
		began := time.Now()
		_, err = pgx.Connect(ctx, t.StandbyURL(db))
		Expect(err).To(MatchError(ContainSubstring("connection refused")))
		AddReportEntry("a new connection to the stopped standby", fmt.Sprintf("%s, after %s", err, time.Since(began)))

		_, err = primary.Exec(ctx, "INSERT INTO probes VALUES (1)")
		Expect(err).NotTo(HaveOccurred())
		Expect(t.StartStandby(ctx)).To(Succeed())
		Expect(t.CaughtUp(ctx)).To(Succeed())
		var found bool
		Expect(connect(ctx, t.StandbyURL(db)).QueryRow(ctx, "SELECT EXISTS (SELECT FROM probes WHERE id = 1)").Scan(&found)).To(Succeed())
		Expect(found).To(BeTrue(), "the write made while the standby was down")
	})

	It("has a standby whose replay can pause: nothing committed meanwhile reaches it, whatever the time", SpecTimeout(2*time.Minute), func(ctx SpecContext) {
		t := specTopology()
		db := newDatabase(ctx, t)
		primary := connect(ctx, t.PrimaryURL(db))
		_, err := primary.Exec(ctx, "CREATE TABLE probes (id int PRIMARY KEY)")
		Expect(err).NotTo(HaveOccurred())
		Expect(t.CaughtUp(ctx)).To(Succeed())
		standby := connect(ctx, t.StandbyURL(db))

		Expect(t.PauseReplay(ctx)).To(Succeed())
		DeferCleanup(t.ResumeReplay)
		var written time.Time
		Expect(primary.QueryRow(ctx, "INSERT INTO probes VALUES (1) RETURNING clock_timestamp()").Scan(&written)).To(Succeed())
		var commitLSN string
		Expect(primary.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&commitLSN)).To(Succeed())
		By("the standby has received the commit, and the apply delay has passed")
		Eventually(func(g Gomega) {
			var received, delayed, found bool
			g.Expect(standby.QueryRow(ctx, "SELECT pg_last_wal_receive_lsn() >= $1::pg_lsn, clock_timestamp() >= $2::timestamptz + $3::interval, "+
				"EXISTS (SELECT FROM probes WHERE id = 1)", commitLSN, written, t.ApplyDelay.String()).Scan(&received, &delayed, &found)).To(Succeed())
			g.Expect(found).To(BeFalse(), "replay is paused")
			g.Expect(received && delayed).To(BeTrue())
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())

		Expect(t.ResumeReplay(ctx)).To(Succeed())
		Eventually(func(g Gomega) bool {
			var found bool
			g.Expect(standby.QueryRow(ctx, "SELECT EXISTS (SELECT FROM probes WHERE id = 1)").Scan(&found)).To(Succeed())
			return found
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(50 * time.Millisecond).Should(BeTrue())
	})
})

var _ = Describe("A topology in a directory of its own", func() {
	It("starts once however often it is asked to, takes its settings, and leaves nothing behind when stopped", SpecTimeout(3*time.Minute), func(ctx SpecContext) {
		specTopology() // skips where the programs are missing
		// Under a directory the servers' account may enter (a test's TempDir is its owner's alone).
		parent, err := os.MkdirTemp("", "pgcluster-spec-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, parent)
		Expect(os.Chmod(parent, 0o755)).To(Succeed())
		dir := filepath.Join(parent, "topology")
		opts := pgcluster.Options{Dir: dir, MaxConnections: 30, ApplyDelay: -1, PoolSize: 5}
		t, err := pgcluster.Start(ctx, opts)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(t.Stop)
		Expect(t.StartedIn).To(BeNumerically(">", 0))

		var started time.Time
		for _, url := range []string{t.PrimaryURL("postgres"), t.StandbyURL("postgres")} {
			var maxConns, delay string
			conn := connect(ctx, url)
			Expect(conn.QueryRow(ctx, "SELECT current_setting('max_connections'), current_setting('recovery_min_apply_delay')").Scan(&maxConns, &delay)).To(Succeed())
			Expect(maxConns).To(Equal("30"), url)
			Expect(delay).To(Equal("0"), url)
		}
		Expect(connect(ctx, t.PrimaryURL("postgres")).QueryRow(ctx, "SELECT pg_postmaster_start_time()").Scan(&started)).To(Succeed())
		Expect(showConfig(ctx, t)).To(HaveKeyWithValue("default_pool_size", "5"))

		again, err := pgcluster.Start(ctx, opts)
		Expect(err).NotTo(HaveOccurred())
		Expect(again.StartedIn).To(BeZero(), "found up")
		Expect(again.PrimaryPort).To(Equal(t.PrimaryPort))
		var startedAgain time.Time
		Expect(connect(ctx, again.PrimaryURL("postgres")).QueryRow(ctx, "SELECT pg_postmaster_start_time()").Scan(&startedAgain)).To(Succeed())
		Expect(startedAgain).To(Equal(started), "the same primary")
		other := opts
		other.MaxConnections = 40
		_, err = pgcluster.Start(ctx, other)
		Expect(err).To(MatchError(ContainSubstring("max_connections 30, not 40")), "a topology up with other settings is never changed under its users")

		Expect(t.Stop()).To(Succeed())
		Expect(dir).NotTo(BeAnExistingFile())
		for _, url := range []string{t.PrimaryURL("postgres"), t.StandbyURL("postgres"), t.BouncerURL("postgres")} {
			_, err := pgx.Connect(ctx, url)
			Expect(err).To(MatchError(ContainSubstring("connection refused")), url)
		}
		Expect(t.Stop()).To(Succeed(), "stopping a stopped topology")
	})

	It("refuses a directory that holds anything else, and leaves it as it was", func(ctx SpecContext) {
		specTopology()
		dir := GinkgoT().TempDir()
		Expect(os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o600)).To(Succeed())
		_, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir})
		Expect(err).To(MatchError(ContainSubstring("refusing to remove it")))
		Expect(filepath.Join(dir, "notes.txt")).To(BeAnExistingFile())
	})
})
