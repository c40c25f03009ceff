package tests

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/store"
)

// quietLogger keeps a replica's request log out of the spec output.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(GinkgoWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// Replica starts another server over h's store with its own configuration (rate limits,
// Redis, a logger of the spec's): one more replica of the same deployment, as a load
// balancer would see it. It shares h's keys and data and is shut down after the spec.
func (h *Harness) Replica(cfg server.Config, logger *slog.Logger) (*Harness, *server.Server) {
	GinkgoHelper()
	cfg = testDefaults(cfg)
	if logger == nil {
		logger = quietLogger()
	}
	srv, err := server.New(cfg, server.Deps{Store: h.Store, Logger: logger})
	Expect(err).NotTo(HaveOccurred())
	ts := httptest.NewServer(srv)
	DeferCleanup(func() {
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		Expect(srv.Shutdown(ctx)).To(Succeed())
	})
	return &Harness{Engine: h.Engine, Store: h.Store, Admin: h.Admin, URL: ts.URL, httpServer: ts, server: srv}, srv
}

// serveStore is a harness of its own: a new server on st (a PostgreSQL store the spec opened
// itself, through a proxy or a topology), with cfg beside the suite's settings (testDefaults),
// logging to logger, and an admin key of the default account. The server stops after the spec.
func serveStore(st *store.Store, cfg server.Config, logger *slog.Logger) *Harness {
	GinkgoHelper()
	srv, err := server.New(testDefaults(cfg), server.Deps{Store: st, Logger: logger})
	Expect(err).NotTo(HaveOccurred())
	ts := httptest.NewServer(srv)
	DeferCleanup(func() {
		ts.Close()
		_ = srv.Close()
	})
	h := &Harness{Engine: "postgres", Store: st, URL: ts.URL, httpServer: ts, server: srv}
	h.Admin = h.Key(auth.RoleAdmin, "")
	return h
}
