package demo_test

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

func TestDemo(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Demo Suite")
}

// engine is a database engine the demo data is seeded into: SQLite always, PostgreSQL when
// TEST_DATABASE_URL names a server (unreachable then means failure, never a skip).
type engine struct {
	name string
	url  func(ctx context.Context) string
}

var engines = func() []engine {
	es := []engine{{name: "SQLite", url: func(context.Context) string {
		return "sqlite://" + filepath.Join(GinkgoT().TempDir(), "ride.db")
	}}}
	if base := os.Getenv("TEST_DATABASE_URL"); base != "" {
		es = append(es, engine{name: "PostgreSQL", url: func(ctx context.Context) string {
			url, drop, err := storetest.NewPostgresDatabase(ctx, base)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(drop)
			return url
		}})
	}
	return es
}()

// open migrates a new, empty database of the engine, closed after the current spec.
func (e engine) open(ctx context.Context) *store.Store {
	st, err := store.Open(ctx, e.url(ctx))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(st.Close)
	Expect(st.Migrate(ctx)).To(Succeed())
	return st
}
