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
	for _, s := range []*sharedTopology{&shared, &undelayed} {
		if s.t != nil {
			_ = s.t.Stop()
		}
	}
	os.Exit(code)
}

func TestTopology(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "PostgreSQL primary, delayed standby and PgBouncer")
}

// sharedTopology is a topology started on first use and stopped when the test binary ends.
type sharedTopology struct {
	opts pgcluster.Options
	once sync.Once
	t    *pgcluster.Topology
	err  error
}

var (
	// shared is the topology of every spec and benchmark of the package.
	shared sharedTopology
	// undelayed is a topology whose standby applies WAL as soon as it can, for the benchmark
	// of a read that waits for the standby.
	undelayed = sharedTopology{opts: pgcluster.Options{ApplyDelay: -1}}
)

// topology starts the shared topology, or reports why it cannot run: a missing PostgreSQL or
// PgBouncer skips, except in CI, which must run these specs (.ci/run installs both).
func topology(skip func(args ...any), fail func(args ...any)) *pgcluster.Topology {
	return shared.start(skip, fail)
}

func (s *sharedTopology) start(skip func(args ...any), fail func(args ...any)) *pgcluster.Topology {
	s.once.Do(func() {
		s.t, s.err = pgcluster.Start(context.Background(), s.opts)
	})
	if errors.Is(s.err, pgcluster.ErrNotInstalled) {
		if os.Getenv("CI") != "" {
			fail(s.err.Error() + "; CI must run the topology's specs, and .ci/run installs what they need")
		}
		skip(s.err.Error())
	}
	if s.err != nil {
		fail(s.err.Error())
	}
	return s.t
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
