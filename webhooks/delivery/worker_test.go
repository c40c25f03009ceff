package delivery_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/webhooks"
	"github.com/rideapi/ride/webhooks/delivery"
)

// fakeStore hands out the deliveries it is given and remembers what the worker asked.
type fakeStore struct {
	mu       sync.Mutex
	due      []delivery.Delivery
	limits   []int
	attempts []delivery.Attempt
	purged   []time.Time
}

// listeningStore commits a delivery a moment after the worker starts listening, and
// announces it.
type listeningStore struct {
	*fakeStore
	later delivery.Delivery
}

func (l listeningStore) ListenEvents(ctx context.Context, notify func()) error {
	time.Sleep(50 * time.Millisecond) // the worker's first claim finds nothing
	l.mu.Lock()
	l.due = append(l.due, l.later)
	l.mu.Unlock()
	notify()
	<-ctx.Done()
	return nil
}

func (f *fakeStore) ClaimDeliveries(_ context.Context, p delivery.ClaimParams) ([]delivery.Delivery, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limits = append(f.limits, p.Limit)
	n := min(p.Limit, len(f.due))
	out := f.due[:n]
	f.due = f.due[n:]
	return out, nil
}

func (f *fakeStore) RecordAttempt(_ context.Context, a delivery.Attempt) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts = append(f.attempts, a)
	return nil
}

// batchStore records batches too. Its first single record is slow, so that the attempts
// ending meanwhile queue up; failBatches makes every batch fail.
type batchStore struct {
	*fakeStore
	failBatches bool
	slowOnce    sync.Once
	batches     []int // sizes of the batches recorded
}

func (b *batchStore) RecordAttempt(ctx context.Context, a delivery.Attempt) error {
	b.slowOnce.Do(func() { time.Sleep(300 * time.Millisecond) })
	return b.fakeStore.RecordAttempt(ctx, a)
}

func (b *batchStore) RecordAttempts(_ context.Context, as []delivery.Attempt) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failBatches {
		return errors.New("one of them is at fault")
	}
	b.batches = append(b.batches, len(as))
	b.attempts = append(b.attempts, as...)
	return nil
}

func (f *fakeStore) PurgeEvents(_ context.Context, before time.Time) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.purged = append(f.purged, before)
	return 0, nil
}

func (f *fakeStore) snapshot() (limits []int, attempts []delivery.Attempt, purged []time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.limits...), append([]delivery.Attempt(nil), f.attempts...), append([]time.Time(nil), f.purged...)
}

var _ = Describe("The worker", func() {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	claimed := func(url string, n int) delivery.Delivery {
		return delivery.Delivery{ID: int64(n), Attempt: 1, URL: url, EndpointID: "whe_1", Secret: "whsec_c2VjcmV0",
			Event: webhooks.Event{ID: "evt_" + string(rune('a'+n)), Type: "trip.completed", CreatedAt: now, Data: []byte(`{}`)}}
	}
	runDraining := func(store *fakeStore, drain time.Duration) (stop func()) {
		w, err := delivery.NewWorker(delivery.WorkerConfig{
			Store: store, Client: delivery.NewClient(delivery.ClientOptions{Insecure: true, Timeout: 5 * time.Second}),
			Now: func() time.Time { return now }, NewAttemptID: func() string { return "wha_1" },
			Concurrency: 2, PollInterval: 10 * time.Millisecond, Drain: drain,
		})
		Expect(err).NotTo(HaveOccurred())
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			Expect(w.Run(ctx)).To(Succeed())
		}()
		return func() { cancel(); <-done }
	}
	// run stops its attempts in flight 50 ms after being told to stop.
	run := func(store *fakeStore) (stop func()) { return runDraining(store, 50*time.Millisecond) }

	It("lets the attempts in flight finish when it stops, within the drain", func() {
		arrived := make(chan struct{}, 2)
		receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			arrived <- struct{}{}
			time.Sleep(300 * time.Millisecond) // still answering when the worker is told to stop
			w.WriteHeader(http.StatusOK)
		}))
		defer receiver.Close()
		store := &fakeStore{due: []delivery.Delivery{claimed(receiver.URL, 0), claimed(receiver.URL, 1)}}
		stop := runDraining(store, 0) // the default drain: the client's timeout and 2 s
		Eventually(arrived).Should(HaveLen(2))
		stop()
		_, attempts, _ := store.snapshot()
		Expect(attempts).To(HaveLen(2))
		for _, a := range attempts {
			Expect(a.Outcome).To(Equal(delivery.Succeeded), "finished, not cut off: the next worker sends nothing twice")
		}
	})

	It("claims a delivery as soon as the store announces it, not at the next poll", func() {
		receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusOK)
		}))
		defer receiver.Close()
		store := &fakeStore{}
		w, err := delivery.NewWorker(delivery.WorkerConfig{
			Store: listeningStore{store, claimed(receiver.URL, 0)}, Now: func() time.Time { return now },
			Client:       delivery.NewClient(delivery.ClientOptions{Insecure: true, Timeout: 5 * time.Second}),
			NewAttemptID: func() string { return "wha_1" }, PollInterval: time.Hour,
		})
		Expect(err).NotTo(HaveOccurred())
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = w.Run(ctx) }()
		defer func() { cancel(); <-done }()
		// With an hour between polls, only the announcement can make this attempt.
		Eventually(func() []delivery.Attempt { _, a, _ := store.snapshot(); return a }).
			WithTimeout(5 * time.Second).Should(ConsistOf(HaveField("Outcome", delivery.Succeeded)))
	})

	It("records the attempts that end during a record together in the next one, each alone when that fails", func() {
		receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusOK)
		}))
		defer receiver.Close()
		for _, failBatches := range []bool{false, true} {
			store := &batchStore{fakeStore: &fakeStore{}, failBatches: failBatches}
			for i := range 8 {
				store.due = append(store.due, claimed(receiver.URL, i))
			}
			w, err := delivery.NewWorker(delivery.WorkerConfig{
				Store: store, Client: delivery.NewClient(delivery.ClientOptions{Insecure: true, Timeout: 5 * time.Second}),
				Now: func() time.Time { return now }, NewAttemptID: func() string { return "wha_1" },
				Concurrency: 8, PollInterval: 10 * time.Millisecond,
			})
			Expect(err).NotTo(HaveOccurred())
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = w.Run(ctx) }()
			Eventually(func() []delivery.Attempt { _, a, _ := store.snapshot(); return a }).
				WithTimeout(5 * time.Second).Should(HaveLen(8))
			cancel()
			<-done
			store.mu.Lock()
			if failBatches {
				Expect(store.batches).To(BeEmpty(), "recorded one by one")
			} else {
				Expect(store.batches).To(ContainElement(BeNumerically(">", 1)))
			}
			store.mu.Unlock()
		}
	})

	It("sends nothing once the horizon has passed, and records the delivery failed", func() {
		calls := make(chan struct{}, 1)
		receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls <- struct{}{}
			w.WriteHeader(http.StatusOK)
		}))
		defer receiver.Close()
		late := claimed(receiver.URL, 0)
		late.Event.CreatedAt = now.Add(-delivery.DefaultHorizon) // due at the horizon itself: too late
		store := &fakeStore{due: []delivery.Delivery{late}}
		stop := run(store)
		Eventually(func() []delivery.Attempt { _, a, _ := store.snapshot(); return a }).Should(ConsistOf(And(
			HaveField("Outcome", delivery.Failed), HaveField("ResponseStatus", 0), HaveField("Error", ContainSubstring("horizon")))))
		stop()
		Expect(calls).To(BeEmpty(), "the receiver heard nothing")
	})

	It("refuses a horizon within an attempt's lease, which would leave an attempt cut off by a crash unretried", func() {
		_, err := delivery.NewWorker(delivery.WorkerConfig{Store: &fakeStore{}, NewAttemptID: func() string { return "wha_1" }, Policy: delivery.RetryPolicy{Horizon: 30 * time.Second}})
		Expect(err).To(MatchError(ContainSubstring("longer than the attempt lease of 40s")))
		_, err = delivery.NewWorker(delivery.WorkerConfig{Store: &fakeStore{}, NewAttemptID: func() string { return "wha_1" }, Policy: delivery.RetryPolicy{Horizon: time.Minute}})
		Expect(err).NotTo(HaveOccurred())
	})

	It("purges events past the 30-day retention when it starts", func() {
		store := &fakeStore{}
		stop := run(store)
		defer stop()
		Eventually(func() []time.Time { _, _, p := store.snapshot(); return p }).Should(ContainElement(now.Add(-30 * 24 * time.Hour)))
	})

	It("never claims more than it has free slots, and records interrupted attempts as due again at once", func() {
		receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Read the body first: only then does the server notice the client going away.
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done() // hang until the worker gives up
		}))
		defer receiver.Close()
		store := &fakeStore{}
		for i := range 5 {
			store.due = append(store.due, claimed(receiver.URL, i))
		}
		stop := run(store)
		Eventually(func() []int { l, _, _ := store.snapshot(); return l }).Should(ContainElement(2))
		Consistently(func() []int { l, _, _ := store.snapshot(); return l }, 100*time.Millisecond).Should(HaveEach(BeNumerically("<=", 2)))
		stop()

		limits, attempts, _ := store.snapshot()
		Expect(limits).To(HaveEach(BeNumerically("<=", 2)))
		Expect(attempts).To(HaveLen(2), "the two in flight, cut off by the stop")
		for _, a := range attempts {
			Expect(a.Outcome).To(Equal(delivery.Pending))
			Expect(a.NextAttemptAt).To(Equal(now))
			Expect(a.Error).To(ContainSubstring("interrupted"))
		}
	})
})
