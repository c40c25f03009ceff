package pgcluster_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/tests/pgcluster"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.t != nil {
		_ = shared.t.Stop()
	}
	os.Exit(code)
}

func TestTopology(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "PostgreSQL primary, delayed standby and PgBouncer")
}

// shared is the topology of every spec and benchmark of the package, started on first use and
// stopped when the test binary ends.
var shared struct {
	once sync.Once
	t    *pgcluster.Topology
	err  error
}

// topology starts the shared topology, or reports why it cannot run: a missing PostgreSQL or
// PgBouncer skips, except in CI, which must run these specs (.ci/run installs both).
func topology(skip func(args ...any), fail func(args ...any)) *pgcluster.Topology {
	shared.once.Do(func() {
		shared.t, shared.err = pgcluster.Start(context.Background(), pgcluster.Options{})
	})
	if errors.Is(shared.err, pgcluster.ErrNotInstalled) {
		if os.Getenv("CI") != "" {
			fail(shared.err.Error() + "; CI must run the topology's specs, and .ci/run installs what they need")
		}
		skip(shared.err.Error())
	}
	if shared.err != nil {
		fail(shared.err.Error())
	}
	return shared.t
}

// specTopology is topology for a spec.
func specTopology() *pgcluster.Topology {
	GinkgoHelper()
	return topology(func(args ...any) { Skip(args[0].(string)) }, func(args ...any) { Fail(args[0].(string)) })
}

// benchTopology is topology for a benchmark.
func benchTopology(b *testing.B) *pgcluster.Topology {
	b.Helper()
	return topology(b.Skip, b.Fatal)
}
