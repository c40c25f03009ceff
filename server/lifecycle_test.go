package server

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/store"
)

var _ = Describe("Server lifecycle", func() {
	var s *Server

	BeforeEach(func(ctx SpecContext) {
		st, err := store.Open(ctx, "sqlite://"+filepath.Join(GinkgoT().TempDir(), "ride.db"))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(st.Close)
		s, err = New(Config{CursorSecret: []byte("lifecycle-test-secret-0123"), RateLimitRead: 1}, Deps{Store: st})
		Expect(err).NotTo(HaveOccurred())
	})

	It("stops background workers on Shutdown and waits for them", func() {
		var stopped atomic.Bool
		s.startWorker(func(ctx context.Context) {
			<-ctx.Done()
			time.Sleep(20 * time.Millisecond) // finishing the batch in hand
			stopped.Store(true)
		})
		Expect(s.ready.Load()).To(BeTrue())
		Expect(s.Shutdown(context.Background())).To(Succeed())
		Expect(stopped.Load()).To(BeTrue(), "Shutdown returned before the worker finished")
		Expect(s.ready.Load()).To(BeFalse(), "a stopping server is not ready")
		Expect(s.Shutdown(context.Background())).To(Succeed(), "a second Shutdown is harmless")
	})

	It("holds the workers of a starting server until it is ready", func(ctx SpecContext) {
		st, err := store.Open(ctx, "sqlite://"+filepath.Join(GinkgoT().TempDir(), "ride.db"))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(st.Close)
		starting, err := New(Config{CursorSecret: []byte("lifecycle-test-secret-0123")}, Deps{Store: st, Starting: true})
		Expect(err).NotTo(HaveOccurred())
		Expect(starting.ready.Load()).To(BeFalse())
		var ran atomic.Bool
		started := make(chan struct{})
		starting.startWorker(func(ctx context.Context) {
			ran.Store(true)
			close(started)
			<-ctx.Done()
		})
		Consistently(ran.Load, 50*time.Millisecond, 10*time.Millisecond).Should(BeFalse(), "a worker ran before migrations were done")
		starting.SetReady(true)
		Eventually(started).Should(BeClosed())
		Expect(starting.Shutdown(ctx)).To(Succeed())
	})

	It("gives up on a worker that ignores its context when the deadline passes", func() {
		release := make(chan struct{})
		DeferCleanup(func() { close(release) })
		s.startWorker(func(context.Context) { <-release })
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		Expect(s.Shutdown(ctx)).To(MatchError(ContainSubstring("background workers still running")))
	})
})
