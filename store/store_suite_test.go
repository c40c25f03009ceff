package store_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/store/storetest"
)

func TestStore(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Store Suite")
}

// testEngine is one database engine the conformance specs run on. shared is a migrated
// database emptied before every spec; newDatabase creates an empty, unmigrated database that is
// removed after the current node, and returns its URL.
type testEngine struct {
	name        string
	shared      *store.Store
	newDatabase func(ctx context.Context) string
}

// fresh opens a new, empty, unmigrated database of the engine.
func (e *testEngine) fresh(ctx context.Context) *store.Store {
	return openStore(ctx, e.newDatabase(ctx))
}

// openStore opens url and closes it again after the current node.
func openStore(ctx context.Context, url string, opts ...store.Option) *store.Store {
	st, err := store.Open(ctx, url, opts...)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(st.Close)
	return st
}

// engines lists the engines under test: SQLite always, PostgreSQL when TEST_DATABASE_URL names
// a server (unreachable then means failure, never a skip).
var engines = func() []*testEngine {
	es := []*testEngine{{name: "SQLite", newDatabase: newSQLiteDatabase}}
	if os.Getenv("TEST_DATABASE_URL") != "" {
		es = append(es, &testEngine{name: "PostgreSQL", newDatabase: newPostgresDatabase})
	}
	return es
}()

var _ = BeforeSuite(func(ctx SpecContext) {
	// Without a server the PostgreSQL specs are not even declared: in CI that is a failure.
	if os.Getenv("CI") != "" && os.Getenv("TEST_DATABASE_URL") == "" {
		Fail("CI must run the PostgreSQL specs, but TEST_DATABASE_URL is unset (.ci/run sets it)")
	}
	for _, e := range engines {
		e.shared = e.fresh(ctx)
		Expect(e.shared.Migrate(ctx)).To(Succeed())
	}
})

// forEachEngine registers the same specs once per engine under test.
func forEachEngine(body func(e *testEngine)) {
	for _, e := range engines {
		Context("on "+e.name, func() {
			BeforeEach(func(ctx SpecContext) {
				emptyTables(ctx, e.shared)
			})
			body(e)
		})
	}
}

// emptyTables removes every row (children first), so each spec starts from an empty schema
// without paying for a new database.
func emptyTables(ctx context.Context, st *store.Store) {
	for _, table := range []string{"webhook_attempts", "webhook_deliveries", "webhook_endpoints", "idempotency_records", "receipts", "payments", "events", "cancellations", "fare_estimates", "trips", "api_keys", "drivers", "riders", "cities"} {
		Expect(st.TestDB().WithContext(ctx).Exec("DELETE FROM " + table).Error).To(Succeed())
	}
}

func newSQLiteDatabase(context.Context) string {
	dir, err := os.MkdirTemp("", "ride-store-test-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	return "sqlite://" + filepath.Join(dir, "ride.db")
}

// newPostgresDatabase creates a database of its own on the TEST_DATABASE_URL server. An
// unreachable server fails the spec, never skips it.
func newPostgresDatabase(ctx context.Context) string {
	url, drop, err := storetest.NewPostgresDatabase(ctx, os.Getenv("TEST_DATABASE_URL"))
	if err != nil {
		// Only the message: Gomega would dump the driver's config, password included.
		Fail("TEST_DATABASE_URL is set but PostgreSQL is unreachable: " + err.Error())
	}
	// Stores opened on it later are closed first: cleanups run last in, first out.
	DeferCleanup(drop)
	return url
}
