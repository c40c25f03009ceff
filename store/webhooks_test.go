package store_test

import (
	"context"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/webhooks"
)

type endpointOpts struct {
	Events    []string
	Disabled  bool
	CreatedAt time.Time
	Account   string
}

func createEndpoint(ctx context.Context, st *store.Store, o endpointOpts) store.WebhookEndpoint {
	if len(o.Events) == 0 {
		o.Events = []string{"trip.completed"}
	}
	if o.CreatedAt.IsZero() {
		o.CreatedAt = time.Now().Add(-time.Hour)
	}
	if o.Account == "" {
		o.Account = "acct_default"
	}
	status := store.WebhookEnabled
	if o.Disabled {
		status = store.WebhookDisabled
	}
	w, err := st.CreateWebhookEndpoint(ctx, store.WebhookEndpoint{
		ID: newID("whe_"), Account: o.Account, URL: "https://partner.example.com/hooks", EventTypes: o.Events,
		Status: status, Secret: "whsec_c2VjcmV0", CreatedAt: o.CreatedAt, UpdatedAt: o.CreatedAt,
	})
	Expect(err).NotTo(HaveOccurred())
	return w
}

func appendEvent(ctx context.Context, st *store.Store, eventType string, at time.Time) store.Event {
	e, err := st.AppendEvent(ctx, store.Event{
		ID: newID("evt_"), Account: store.DefaultAccount, Type: eventType, SubjectID: newID("trp_"),
		Data: `{"trip_id":"trp_x"}`, CreatedAt: at,
	})
	Expect(err).NotTo(HaveOccurred())
	return e
}

// fanOutNow runs the fan-out until it has nothing more to take at this moment.
func fanOutNow(ctx context.Context, st *store.Store) int {
	total := 0
	for {
		n, err := st.FanOutEvents(ctx, webhooks.FanOutParams{Now: time.Now(), Limit: 50})
		Expect(err).NotTo(HaveOccurred())
		total += n
		if n < 50 {
			return total
		}
	}
}

// fanOutAll fans out every event committed so far. On PostgreSQL the fan-out takes only events
// older than every writing transaction still running in the cluster, so that none is skipped;
// a transaction of another test package running at the same moment can hold events back
// briefly, so this keeps going until none is left behind the cursor.
func fanOutAll(ctx context.Context, st *store.Store) int {
	GinkgoHelper()
	remaining := `SELECT count(*) FROM events WHERE seq > (SELECT last_seq FROM webhook_fanout WHERE id = 1)`
	if st.Engine() == store.EnginePostgres {
		remaining = `SELECT count(*) FROM events e, webhook_fanout f
			WHERE f.id = 1 AND (e.txid, e.seq) > (f.last_txid, f.last_seq)`
	}
	total := 0
	Eventually(func() int64 {
		total += fanOutNow(ctx, st)
		var left int64
		Expect(st.TestDB().WithContext(ctx).Raw(remaining).Scan(&left).Error).To(Succeed())
		return left
	}).WithTimeout(30 * time.Second).WithPolling(20 * time.Millisecond).Should(BeZero())
	return total
}

func claimAll(ctx context.Context, st *store.Store, now time.Time, lease time.Duration) []webhooks.Delivery {
	ds, err := st.ClaimDeliveries(ctx, webhooks.ClaimParams{Now: now, LeaseUntil: now.Add(lease), Limit: 100})
	Expect(err).NotTo(HaveOccurred())
	return ds
}

var _ = Describe("Webhook deliveries", func() {
	forEachEngine(func(e *testEngine) {
		var st *store.Store
		BeforeEach(func() { st = e.shared })

		It("fans each event out once, to the enabled endpoints that subscribe and existed at its creation", func(ctx SpecContext) {
			now := time.Now()
			wanted := createEndpoint(ctx, st, endpointOpts{Events: []string{"trip.created", "trip.completed"}})
			createEndpoint(ctx, st, endpointOpts{Events: []string{"trip.created"}})
			createEndpoint(ctx, st, endpointOpts{Disabled: true})
			createEndpoint(ctx, st, endpointOpts{CreatedAt: now.Add(time.Minute)}) // registered after the event
			event := appendEvent(ctx, st, "trip.completed", now)

			Expect(fanOutAll(ctx, st)).To(Equal(1))
			Expect(fanOutAll(ctx, st)).To(Equal(0), "the cursor moved past it")
			ds := claimAll(ctx, st, time.Now(), time.Minute)
			Expect(ds).To(HaveLen(1))
			d := ds[0]
			Expect(d.EndpointID).To(Equal(wanted.ID))
			Expect(d.URL).To(Equal(wanted.URL))
			Expect(d.Secret).To(Equal(wanted.Secret))
			Expect(d.Attempt).To(Equal(1))
			Expect(d.Event.ID).To(Equal(event.ID))
			Expect(d.Event.Type).To(Equal("trip.completed"))
			Expect(d.Event.CreatedAt).To(Equal(event.CreatedAt))
			Expect(d.Event.Data).To(MatchJSON(`{"trip_id":"trp_x"}`))
		})

		It("fans out a backlog larger than one batch, in order, exactly once", func(ctx SpecContext) {
			createEndpoint(ctx, st, endpointOpts{})
			for range 120 {
				appendEvent(ctx, st, "trip.completed", time.Now())
			}
			Expect(fanOutAll(ctx, st)).To(Equal(120))
			Expect(claimAll(ctx, st, time.Now(), time.Minute)).To(HaveLen(100))
			Expect(claimAll(ctx, st, time.Now(), time.Minute)).To(HaveLen(20))
		})

		It("gives concurrent claims disjoint deliveries", func(ctx SpecContext) {
			createEndpoint(ctx, st, endpointOpts{})
			for range 40 {
				appendEvent(ctx, st, "trip.completed", time.Now())
			}
			fanOutAll(ctx, st)
			var mu sync.Mutex
			seen := map[int64]int{}
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					defer GinkgoRecover()
					now := time.Now()
					ds, err := st.ClaimDeliveries(ctx, webhooks.ClaimParams{Now: now, LeaseUntil: now.Add(time.Minute), Limit: 7})
					Expect(err).NotTo(HaveOccurred())
					mu.Lock()
					defer mu.Unlock()
					for _, d := range ds {
						seen[d.ID]++
					}
				})
			}
			wg.Wait()
			Expect(seen).To(HaveLen(40))
			for id, n := range seen {
				Expect(n).To(Equal(1), "delivery %d claimed %d times", id, n)
			}
		})

		It("numbers attempts, waits for the next one, and takes a delivery back after its lease", func(ctx SpecContext) {
			createEndpoint(ctx, st, endpointOpts{})
			appendEvent(ctx, st, "trip.completed", time.Now())
			fanOutAll(ctx, st)
			t0 := time.Now()
			d := claimAll(ctx, st, t0, time.Minute)[0]
			Expect(claimAll(ctx, st, t0.Add(59*time.Second), time.Minute)).To(BeEmpty(), "leased")

			// A failed attempt due again in 10 minutes.
			Expect(st.RecordAttempt(ctx, webhooks.Attempt{ID: newID("wha_"), DeliveryID: d.ID, EndpointID: d.EndpointID,
				EventID: d.Event.ID, EventType: d.Event.Type, Number: 1, Outcome: webhooks.Pending, ResponseStatus: 503,
				Error: "503", AttemptedAt: t0, NextAttemptAt: t0.Add(10 * time.Minute)})).To(Succeed())
			Expect(claimAll(ctx, st, t0.Add(9*time.Minute), time.Minute)).To(BeEmpty())
			d2 := claimAll(ctx, st, t0.Add(10*time.Minute), time.Minute)
			Expect(d2).To(HaveLen(1))
			Expect(d2[0].Attempt).To(Equal(2))

			// Its worker dies: after the lease another claim takes it, as attempt 3 ...
			d3 := claimAll(ctx, st, t0.Add(11*time.Minute+time.Second), time.Minute)
			Expect(d3).To(HaveLen(1))
			Expect(d3[0].Attempt).To(Equal(3))
			// ... and a late record of attempt 2 is logged but does not move the delivery on.
			Expect(st.RecordAttempt(ctx, webhooks.Attempt{ID: newID("wha_"), DeliveryID: d.ID, EndpointID: d.EndpointID,
				EventID: d.Event.ID, EventType: d.Event.Type, Number: 2, Outcome: webhooks.Succeeded, ResponseStatus: 200,
				AttemptedAt: t0.Add(10 * time.Minute)})).To(Succeed())
			Expect(claimAll(ctx, st, t0.Add(13*time.Minute), time.Minute)).To(HaveLen(1), "attempt 3's lease ran out: still pending")

			page, err := st.ListWebhookAttempts(ctx, d.EndpointID, store.PageParams{Limit: 10})
			Expect(err).NotTo(HaveOccurred())
			Expect(page.Items).To(HaveLen(2))
			Expect(page.Items[0].Attempt).To(Equal(2))
			Expect(page.Items[1].Attempt).To(Equal(1))
			Expect(*page.Items[1].NextAttemptAt).To(BeTemporally("~", t0.Add(10*time.Minute), time.Microsecond))
		})

		It("refuses a second log entry for the same attempt", func(ctx SpecContext) {
			createEndpoint(ctx, st, endpointOpts{})
			appendEvent(ctx, st, "trip.completed", time.Now())
			fanOutAll(ctx, st)
			d := claimAll(ctx, st, time.Now(), time.Minute)[0]
			a := webhooks.Attempt{ID: newID("wha_"), DeliveryID: d.ID, EndpointID: d.EndpointID, EventID: d.Event.ID,
				EventType: d.Event.Type, Number: 1, Outcome: webhooks.Succeeded, ResponseStatus: 200, AttemptedAt: time.Now()}
			Expect(st.RecordAttempt(ctx, a)).To(Succeed())
			a.ID = newID("wha_")
			Expect(st.RecordAttempt(ctx, a)).To(MatchError(store.ErrDuplicate))
		})

		It("disables an endpoint on request and fails its other pending deliveries", func(ctx SpecContext) {
			w := createEndpoint(ctx, st, endpointOpts{})
			for range 3 {
				appendEvent(ctx, st, "trip.completed", time.Now())
			}
			fanOutAll(ctx, st)
			now := time.Now()
			ds, err := st.ClaimDeliveries(ctx, webhooks.ClaimParams{Now: now, LeaseUntil: now.Add(time.Minute), Limit: 1})
			Expect(err).NotTo(HaveOccurred())
			d := ds[0]
			Expect(st.RecordAttempt(ctx, webhooks.Attempt{ID: newID("wha_"), DeliveryID: d.ID, EndpointID: d.EndpointID,
				EventID: d.Event.ID, EventType: d.Event.Type, Number: 1, Outcome: webhooks.Failed, ResponseStatus: 410,
				AttemptedAt: now, DisableEndpoint: true})).To(Succeed())
			got, err := st.WebhookEndpointByID(ctx, w.Account, w.ID)
			Expect(err).NotTo(HaveOccurred())
			Expect(got.Status).To(Equal(store.WebhookDisabled))
			Expect(claimAll(ctx, st, now.Add(time.Hour), time.Minute)).To(BeEmpty())
			appendEvent(ctx, st, "trip.completed", time.Now())
			fanOutAll(ctx, st)
			Expect(claimAll(ctx, st, time.Now().Add(time.Hour), time.Minute)).To(BeEmpty(), "no deliveries for a disabled endpoint")
		})

		It("deletes an endpoint with its deliveries and log, once", func(ctx SpecContext) {
			w := createEndpoint(ctx, st, endpointOpts{})
			appendEvent(ctx, st, "trip.completed", time.Now())
			fanOutAll(ctx, st)
			d := claimAll(ctx, st, time.Now(), time.Minute)[0]
			Expect(st.DeleteWebhookEndpoint(ctx, w.Account, w.ID)).To(Succeed())
			Expect(st.DeleteWebhookEndpoint(ctx, w.Account, w.ID)).To(MatchError(store.ErrNotFound))
			// The attempt in flight finishes after the deletion: nothing to record, no error.
			Expect(st.RecordAttempt(ctx, webhooks.Attempt{ID: newID("wha_"), DeliveryID: d.ID, EndpointID: w.ID,
				EventID: d.Event.ID, EventType: d.Event.Type, Number: 1, Outcome: webhooks.Succeeded, AttemptedAt: time.Now()})).To(Succeed())
			page, err := st.ListWebhookAttempts(ctx, w.ID, store.PageParams{Limit: 10})
			Expect(err).NotTo(HaveOccurred())
			Expect(page.Items).To(BeEmpty())
		})

		It("scopes endpoints to their account", func(ctx SpecContext) {
			w := createEndpoint(ctx, st, endpointOpts{Account: "acct_a"})
			_, err := st.WebhookEndpointByID(ctx, "acct_b", w.ID)
			Expect(err).To(MatchError(store.ErrNotFound))
			Expect(st.DeleteWebhookEndpoint(ctx, "acct_b", w.ID)).To(MatchError(store.ErrNotFound))
			_, err = st.RotateWebhookSecret(ctx, store.RotateWebhookSecretParams{Account: "acct_b", ID: w.ID, NewSecret: "x", Now: time.Now()})
			Expect(err).To(MatchError(store.ErrNotFound))
		})

		It("rotates secrets, keeping at most the one replaced", func(ctx SpecContext) {
			w := createEndpoint(ctx, st, endpointOpts{})
			now := time.Now()
			r1, err := st.RotateWebhookSecret(ctx, store.RotateWebhookSecretParams{Account: w.Account, ID: w.ID,
				NewSecret: "whsec_b25l", PreviousExpiresAt: now.Add(time.Hour), Now: now})
			Expect(err).NotTo(HaveOccurred())
			Expect(r1.Secret).To(Equal("whsec_b25l"))
			Expect(*r1.PreviousSecret).To(Equal(w.Secret))
			Expect(*r1.PreviousSecretExpiresAt).To(BeTemporally("~", now.Add(time.Hour), time.Microsecond))

			r2, err := st.RotateWebhookSecret(ctx, store.RotateWebhookSecretParams{Account: w.Account, ID: w.ID,
				NewSecret: "whsec_dHdv", PreviousExpiresAt: now.Add(time.Hour), Now: now})
			Expect(err).NotTo(HaveOccurred())
			Expect(*r2.PreviousSecret).To(Equal("whsec_b25l"), "the first secret is gone")

			r3, err := st.RotateWebhookSecret(ctx, store.RotateWebhookSecretParams{Account: w.Account, ID: w.ID,
				NewSecret: "whsec_dGhyZWU=", PreviousExpiresAt: now, Now: now})
			Expect(err).NotTo(HaveOccurred())
			Expect(r3.PreviousSecret).To(BeNil(), "a grace period of 0 revokes at once")
			Expect(r3.PreviousSecretExpiresAt).To(BeNil())

			// Claims carry the secrets that sign.
			createEndpoint(ctx, st, endpointOpts{Events: []string{"trip.created"}})
			_, err = st.RotateWebhookSecret(ctx, store.RotateWebhookSecretParams{Account: w.Account, ID: w.ID,
				NewSecret: "whsec_Zm91cg==", PreviousExpiresAt: now.Add(time.Hour), Now: now})
			Expect(err).NotTo(HaveOccurred())
			appendEvent(ctx, st, "trip.completed", time.Now())
			fanOutAll(ctx, st)
			d := claimAll(ctx, st, time.Now(), time.Minute)[0]
			Expect(d.Secret).To(Equal("whsec_Zm91cg=="))
			Expect(d.PreviousSecret).To(Equal("whsec_dGhyZWU="))
			Expect(d.PreviousSecretExpiresAt).To(BeTemporally("~", now.Add(time.Hour), time.Microsecond))
		})

		It("purges old events with their deliveries and attempts", func(ctx SpecContext) {
			w := createEndpoint(ctx, st, endpointOpts{CreatedAt: time.Now().Add(-40 * 24 * time.Hour)})
			old := appendEvent(ctx, st, "trip.completed", time.Now().Add(-31*24*time.Hour))
			fresh := appendEvent(ctx, st, "trip.completed", time.Now())
			fanOutAll(ctx, st)
			for _, d := range claimAll(ctx, st, time.Now(), time.Minute) {
				Expect(st.RecordAttempt(ctx, webhooks.Attempt{ID: newID("wha_"), DeliveryID: d.ID, EndpointID: d.EndpointID,
					EventID: d.Event.ID, EventType: d.Event.Type, Number: 1, Outcome: webhooks.Succeeded, AttemptedAt: time.Now()})).To(Succeed())
			}
			n, err := st.PurgeEvents(ctx, time.Now().Add(-30*24*time.Hour))
			Expect(err).NotTo(HaveOccurred())
			Expect(n).To(BeEquivalentTo(1))
			_, err = st.EventByID(ctx, store.DefaultAccount, old.ID)
			Expect(err).To(MatchError(store.ErrNotFound))
			_, err = st.EventByID(ctx, store.DefaultAccount, fresh.ID)
			Expect(err).NotTo(HaveOccurred())
			page, err := st.ListWebhookAttempts(ctx, w.ID, store.PageParams{Limit: 10})
			Expect(err).NotTo(HaveOccurred())
			Expect(page.Items).To(HaveLen(1))
			Expect(page.Items[0].EventID).To(Equal(fresh.ID))
		})

		if e.name == "PostgreSQL" {
			It("never skips an event whose transaction commits after a later event's", func(ctx SpecContext) {
				createEndpoint(ctx, st, endpointOpts{})
				appended, release, done := make(chan store.Event), make(chan struct{}), make(chan error)
				go func() {
					done <- st.WithTx(ctx, func(tx *store.Store) error {
						early := appendEvent(ctx, tx, "trip.completed", time.Now()) // the lower seq
						appended <- early
						<-release
						return nil
					})
				}()
				early := <-appended
				late := appendEvent(ctx, st, "trip.completed", time.Now()) // higher seq, committed first
				Expect(late.Seq).To(BeNumerically(">", early.Seq))

				// A cursor on seq alone would take the late event now and never see the early one.
				Expect(fanOutNow(ctx, st)).To(Equal(0), "the late event waits while an older transaction runs")
				close(release)
				Expect(<-done).To(Succeed())
				Expect(fanOutAll(ctx, st)).To(Equal(2))
				ids := map[string]bool{}
				for _, d := range claimAll(ctx, st, time.Now(), time.Minute) {
					ids[d.Event.ID] = true
				}
				Expect(ids).To(Equal(map[string]bool{early.ID: true, late.ID: true}))
			})
		}

		It("lists events newest first with keyset pages", func(ctx SpecContext) {
			base := time.Now().Add(-time.Hour)
			var want []string
			for i := range 5 {
				want = append([]string{appendEvent(ctx, st, "trip.created", base.Add(time.Duration(i)*time.Second)).ID}, want...)
			}
			appendEvent(ctx, st, "trip.completed", base.Add(time.Second))
			after := base.Add(-time.Second)
			page, err := st.ListEvents(ctx, store.EventFilter{Account: store.DefaultAccount, Type: "trip.created", CreatedAfter: &after}, store.PageParams{Limit: 3})
			Expect(err).NotTo(HaveOccurred())
			Expect(page.MoreAfter).To(BeTrue())
			Expect(page.MoreBefore).To(BeFalse())
			last := page.Items[2].Keyset()
			next, err := st.ListEvents(ctx, store.EventFilter{Account: store.DefaultAccount, Type: "trip.created", CreatedAfter: &after}, store.PageParams{After: &last, Limit: 3})
			Expect(err).NotTo(HaveOccurred())
			var got []string
			for _, e := range append(page.Items, next.Items...) {
				got = append(got, e.ID)
			}
			Expect(got).To(Equal(want))
			Expect(next.MoreAfter).To(BeFalse())
			Expect(next.MoreBefore).To(BeTrue())
		})
	})
})
