package store_test

import (
	"context"
	"errors"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/jackc/pgx/v5"

	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/webhooks/delivery"
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

func claimAll(ctx context.Context, st *store.Store, now time.Time, lease time.Duration) []delivery.Delivery {
	ds, err := st.ClaimDeliveries(ctx, delivery.ClaimParams{Now: now, LeaseUntil: now.Add(lease), Limit: 100})
	Expect(err).NotTo(HaveOccurred())
	return ds
}

var _ = Describe("Webhook deliveries", func() {
	forEachEngine(func(e *testEngine) {
		var st *store.Store
		BeforeEach(func() { st = e.shared })

		It("makes an event's deliveries as it is written, for the endpoints of its account that subscribe, held for disabled ones", func(ctx SpecContext) {
			now := time.Now()
			wanted := createEndpoint(ctx, st, endpointOpts{Events: []string{"trip.created", "trip.completed"}})
			createEndpoint(ctx, st, endpointOpts{Events: []string{"trip.created"}})
			paused := createEndpoint(ctx, st, endpointOpts{Disabled: true})
			createEndpoint(ctx, st, endpointOpts{Account: "acct_other"})
			event := appendEvent(ctx, st, "trip.completed", now)
			createEndpoint(ctx, st, endpointOpts{}) // registered after the event

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

			enabled := store.WebhookEnabled
			_, err := st.UpdateWebhookEndpoint(ctx, paused.Account, paused.ID, store.WebhookEndpointChange{Status: &enabled, Now: time.Now()})
			Expect(err).NotTo(HaveOccurred())
			Expect(claimAll(ctx, st, time.Now(), time.Minute)).To(ConsistOf(And(HaveField("EndpointID", paused.ID), HaveField("Event.ID", event.ID))),
				"the event written while the endpoint was disabled, once it is enabled")
		})

		It("claims a backlog larger than one claim in the order it fell due, each delivery once", func(ctx SpecContext) {
			createEndpoint(ctx, st, endpointOpts{})
			base := time.Now().Add(-time.Minute)
			var written []string
			for i := range 120 {
				written = append(written, appendEvent(ctx, st, "trip.completed", base.Add(time.Duration(i)*time.Millisecond)).ID)
			}
			var claimed []string
			for _, d := range append(claimAll(ctx, st, time.Now(), time.Minute), claimAll(ctx, st, time.Now(), time.Minute)...) {
				claimed = append(claimed, d.Event.ID)
			}
			Expect(claimed).To(Equal(written))
			Expect(claimAll(ctx, st, time.Now(), time.Minute)).To(BeEmpty())
		})

		It("makes no delivery for an event whose transaction rolls back", func(ctx SpecContext) {
			createEndpoint(ctx, st, endpointOpts{})
			rollBack := errors.New("roll back")
			Expect(st.WithTx(ctx, func(tx *store.Store) error {
				appendEvent(ctx, tx, "trip.completed", time.Now())
				return rollBack
			})).To(MatchError(rollBack))
			Expect(claimAll(ctx, st, time.Now(), time.Minute)).To(BeEmpty())
		})

		It("gives concurrent claims disjoint deliveries", func(ctx SpecContext) {
			createEndpoint(ctx, st, endpointOpts{})
			for range 40 {
				appendEvent(ctx, st, "trip.completed", time.Now())
			}
			var mu sync.Mutex
			seen := map[int64]int{}
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					defer GinkgoRecover()
					now := time.Now()
					ds, err := st.ClaimDeliveries(ctx, delivery.ClaimParams{Now: now, LeaseUntil: now.Add(time.Minute), Limit: 7})
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
			t0 := time.Now()
			d := claimAll(ctx, st, t0, time.Minute)[0]
			Expect(claimAll(ctx, st, t0.Add(59*time.Second), time.Minute)).To(BeEmpty(), "leased")

			// A failed attempt due again in 10 minutes.
			Expect(st.RecordAttempt(ctx, delivery.Attempt{ID: newID("wha_"), DeliveryID: d.ID, EndpointID: d.EndpointID,
				EventID: d.Event.ID, EventType: d.Event.Type, Number: 1, Outcome: delivery.Pending, ResponseStatus: 503,
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
			Expect(st.RecordAttempt(ctx, delivery.Attempt{ID: newID("wha_"), DeliveryID: d.ID, EndpointID: d.EndpointID,
				EventID: d.Event.ID, EventType: d.Event.Type, Number: 2, Outcome: delivery.Succeeded, ResponseStatus: 200,
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
			d := claimAll(ctx, st, time.Now(), time.Minute)[0]
			a := delivery.Attempt{ID: newID("wha_"), DeliveryID: d.ID, EndpointID: d.EndpointID, EventID: d.Event.ID,
				EventType: d.Event.Type, Number: 1, Outcome: delivery.Succeeded, ResponseStatus: 200, AttemptedAt: time.Now()}
			Expect(st.RecordAttempt(ctx, a)).To(Succeed())
			a.ID = newID("wha_")
			Expect(st.RecordAttempt(ctx, a)).To(MatchError(store.ErrDuplicate))
		})

		It("records a batch of attempts in one go, all or none", func(ctx SpecContext) {
			w := createEndpoint(ctx, st, endpointOpts{})
			for range 3 {
				appendEvent(ctx, st, "trip.completed", time.Now())
			}
			now := time.Now()
			ds := claimAll(ctx, st, now, time.Minute)
			Expect(ds).To(HaveLen(3))
			attempt := func(d delivery.Delivery, outcome delivery.Outcome) delivery.Attempt {
				a := delivery.Attempt{ID: newID("wha_"), DeliveryID: d.ID, EndpointID: d.EndpointID, EventID: d.Event.ID,
					EventType: d.Event.Type, Number: d.Attempt, Outcome: outcome, ResponseStatus: 200, AttemptedAt: now}
				if outcome == delivery.Pending {
					a.ResponseStatus, a.Error, a.NextAttemptAt = 503, "503", now.Add(time.Hour)
				}
				return a
			}
			first := attempt(ds[0], delivery.Succeeded)
			Expect(st.RecordAttempt(ctx, first)).To(Succeed())

			// A batch holding a second entry for a logged attempt records nothing.
			again := first
			again.ID = newID("wha_")
			Expect(st.RecordAttempts(ctx, []delivery.Attempt{attempt(ds[1], delivery.Succeeded), again})).To(MatchError(store.ErrDuplicate))
			page, err := st.ListWebhookAttempts(ctx, w.ID, store.PageParams{Limit: 10})
			Expect(err).NotTo(HaveOccurred())
			Expect(page.Items).To(HaveLen(1))

			Expect(st.RecordAttempts(ctx, []delivery.Attempt{attempt(ds[1], delivery.Succeeded), attempt(ds[2], delivery.Pending)})).To(Succeed())
			page, err = st.ListWebhookAttempts(ctx, w.ID, store.PageParams{Limit: 10})
			Expect(err).NotTo(HaveOccurred())
			Expect(page.Items).To(HaveLen(3))
			// The succeeded one is done; the other is due again in an hour, as attempt 2.
			Expect(claimAll(ctx, st, now.Add(59*time.Minute), time.Minute)).To(BeEmpty())
			Expect(claimAll(ctx, st, now.Add(time.Hour), time.Minute)).
				To(ConsistOf(And(HaveField("ID", ds[2].ID), HaveField("Attempt", 2))))
		})

		It("disables an endpoint on request and fails its other pending deliveries", func(ctx SpecContext) {
			w := createEndpoint(ctx, st, endpointOpts{})
			for range 3 {
				appendEvent(ctx, st, "trip.completed", time.Now())
			}
			now := time.Now()
			ds, err := st.ClaimDeliveries(ctx, delivery.ClaimParams{Now: now, LeaseUntil: now.Add(time.Minute), Limit: 1})
			Expect(err).NotTo(HaveOccurred())
			d := ds[0]
			Expect(st.RecordAttempt(ctx, delivery.Attempt{ID: newID("wha_"), DeliveryID: d.ID, EndpointID: d.EndpointID,
				EventID: d.Event.ID, EventType: d.Event.Type, Number: 1, Outcome: delivery.Failed, ResponseStatus: 410,
				AttemptedAt: now, DisableEndpoint: true})).To(Succeed())
			got, err := st.WebhookEndpointByID(ctx, w.Account, w.ID)
			Expect(err).NotTo(HaveOccurred())
			Expect(got.Status).To(Equal(store.WebhookDisabled))
			Expect(claimAll(ctx, st, now.Add(time.Hour), time.Minute)).To(BeEmpty())
			later := appendEvent(ctx, st, "trip.completed", time.Now())
			Expect(claimAll(ctx, st, time.Now().Add(time.Hour), time.Minute)).To(BeEmpty(), "no deliveries for a disabled endpoint")

			enabled := store.WebhookEnabled
			_, err = st.UpdateWebhookEndpoint(ctx, w.Account, w.ID, store.WebhookEndpointChange{Status: &enabled, Now: time.Now()})
			Expect(err).NotTo(HaveOccurred())
			Expect(claimAll(ctx, st, time.Now(), time.Minute)).To(ConsistOf(HaveField("Event.ID", later.ID)),
				"the event written after the 410 was held; the ones pending then stay failed")
		})

		It("holds the deliveries of a disabled endpoint, without holding up others, until it is enabled again", func(ctx SpecContext) {
			paused := createEndpoint(ctx, st, endpointOpts{})
			other := createEndpoint(ctx, st, endpointOpts{Events: []string{"trip.created"}})
			base := time.Now().Add(-time.Minute)
			for i := range 5 {
				appendEvent(ctx, st, "trip.completed", base.Add(time.Duration(i)*time.Millisecond)) // for paused only
			}
			disabled := store.WebhookDisabled
			_, err := st.UpdateWebhookEndpoint(ctx, paused.Account, paused.ID, store.WebhookEndpointChange{Status: &disabled, Now: time.Now()})
			Expect(err).NotTo(HaveOccurred())
			later := appendEvent(ctx, st, "trip.created", time.Now()) // for other only

			// The five fell due first: the claim that meets them holds them, and they are out of
			// the way of the next one.
			claim := func() []delivery.Delivery {
				now := time.Now()
				ds, err := st.ClaimDeliveries(ctx, delivery.ClaimParams{Now: now, LeaseUntil: now.Add(time.Minute), Limit: 5})
				Expect(err).NotTo(HaveOccurred())
				return ds
			}
			Expect(claim()).To(BeEmpty())
			Expect(claim()).To(ConsistOf(And(HaveField("EndpointID", other.ID), HaveField("Event.ID", later.ID))))
			Expect(claimAll(ctx, st, time.Now().Add(24*time.Hour), time.Minute)).
				NotTo(ContainElement(HaveField("EndpointID", paused.ID)), "held, however late")

			enabled := store.WebhookEnabled
			_, err = st.UpdateWebhookEndpoint(ctx, paused.Account, paused.ID, store.WebhookEndpointChange{Status: &enabled, Now: time.Now()})
			Expect(err).NotTo(HaveOccurred())
			resumed := claimAll(ctx, st, time.Now(), time.Minute)
			Expect(resumed).To(HaveLen(5))
			Expect(resumed).To(HaveEach(And(HaveField("EndpointID", paused.ID), HaveField("Attempt", 1))))
		})

		It("deletes an endpoint with its deliveries and log, once", func(ctx SpecContext) {
			w := createEndpoint(ctx, st, endpointOpts{})
			appendEvent(ctx, st, "trip.completed", time.Now())
			d := claimAll(ctx, st, time.Now(), time.Minute)[0]
			Expect(st.DeleteWebhookEndpoint(ctx, w.Account, w.ID)).To(Succeed())
			Expect(st.DeleteWebhookEndpoint(ctx, w.Account, w.ID)).To(MatchError(store.ErrNotFound))
			// The attempt in flight finishes after the deletion: nothing to record, no error.
			Expect(st.RecordAttempt(ctx, delivery.Attempt{ID: newID("wha_"), DeliveryID: d.ID, EndpointID: w.ID,
				EventID: d.Event.ID, EventType: d.Event.Type, Number: 1, Outcome: delivery.Succeeded, AttemptedAt: time.Now()})).To(Succeed())
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
			d := claimAll(ctx, st, time.Now(), time.Minute)[0]
			Expect(d.Secret).To(Equal("whsec_Zm91cg=="))
			Expect(d.PreviousSecret).To(Equal("whsec_dGhyZWU="))
			Expect(d.PreviousSecretExpiresAt).To(BeTemporally("~", now.Add(time.Hour), time.Microsecond))
		})

		It("purges old events with their deliveries and attempts", func(ctx SpecContext) {
			w := createEndpoint(ctx, st, endpointOpts{CreatedAt: time.Now().Add(-40 * 24 * time.Hour)})
			old := appendEvent(ctx, st, "trip.completed", time.Now().Add(-31*24*time.Hour))
			fresh := appendEvent(ctx, st, "trip.completed", time.Now())
			for _, d := range claimAll(ctx, st, time.Now(), time.Minute) {
				Expect(st.RecordAttempt(ctx, delivery.Attempt{ID: newID("wha_"), DeliveryID: d.ID, EndpointID: d.EndpointID,
					EventID: d.Event.ID, EventType: d.Event.Type, Number: 1, Outcome: delivery.Succeeded, AttemptedAt: time.Now()})).To(Succeed())
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
			It("never holds a delivery for good when its endpoint is enabled during the claim", func(ctx SpecContext) {
				w := createEndpoint(ctx, st, endpointOpts{})
				event := appendEvent(ctx, st, "trip.completed", time.Now())
				disabled, enabled := store.WebhookDisabled, store.WebhookEnabled
				_, err := st.UpdateWebhookEndpoint(ctx, w.Account, w.ID, store.WebhookEndpointChange{Status: &disabled, Now: time.Now()})
				Expect(err).NotTo(HaveOccurred())

				// The enabling PATCH has released what was held and not yet committed when a
				// claim meets the delivery.
				enabledNotCommitted, commit, patched := make(chan struct{}), make(chan struct{}), make(chan error)
				go func() {
					patched <- st.WithTx(ctx, func(tx *store.Store) error {
						_, err := tx.UpdateWebhookEndpoint(ctx, w.Account, w.ID, store.WebhookEndpointChange{Status: &enabled, Now: time.Now()})
						close(enabledNotCommitted)
						<-commit
						return err
					})
				}()
				<-enabledNotCommitted
				claimed := make(chan []delivery.Delivery)
				go func() {
					defer GinkgoRecover()
					claimed <- claimAll(ctx, st, time.Now(), time.Minute)
				}()
				time.Sleep(200 * time.Millisecond) // the claim is under way
				close(commit)
				Expect(<-patched).To(Succeed())
				Expect(<-claimed).To(ConsistOf(HaveField("Event.ID", event.ID)), "claimed as enabled, not held")
			})

			It("wakes the delivery workers when an event makes a delivery, not for every event", SpecTimeout(time.Minute), func(ctx SpecContext) {
				url := e.newDatabase(ctx)
				own := openStore(ctx, url)
				Expect(own.Migrate(ctx)).To(Succeed())
				listener, err := pgx.Connect(ctx, url)
				Expect(err).NotTo(HaveOccurred())
				DeferCleanup(func() { _ = listener.Close(context.Background()) })
				_, err = listener.Exec(ctx, "LISTEN ride_events")
				Expect(err).NotTo(HaveOccurred())
				next := func() string {
					n, err := listener.WaitForNotification(ctx)
					Expect(err).NotTo(HaveOccurred())
					return n.Payload
				}

				// An event no endpoint subscribes to, then a marker: the marker comes first.
				appendEvent(ctx, own, "trip.completed", time.Now())
				marker, err := pgx.Connect(ctx, url)
				Expect(err).NotTo(HaveOccurred())
				DeferCleanup(func() { _ = marker.Close(context.Background()) })
				_, err = marker.Exec(ctx, "SELECT pg_notify('ride_events', 'marker')")
				Expect(err).NotTo(HaveOccurred())
				Expect(next()).To(Equal("marker"), "an event that made no delivery woke nobody")

				// An event that makes a delivery wakes the workers.
				createEndpoint(ctx, own, endpointOpts{})
				appendEvent(ctx, own, "trip.completed", time.Now())
				Expect(next()).To(Equal(""))
			})

			It("makes an event's deliveries claimable when its transaction commits, whatever runs beside it", func(ctx SpecContext) {
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

				// The late event does not wait for the early one's transaction, which a cursor
				// in commit order would have to; the early one appears when it commits.
				ids := func() (ids []string) {
					for _, d := range claimAll(ctx, st, time.Now(), time.Minute) {
						ids = append(ids, d.Event.ID)
					}
					return ids
				}
				Expect(ids()).To(Equal([]string{late.ID}))
				close(release)
				Expect(<-done).To(Succeed())
				Expect(ids()).To(Equal([]string{early.ID}))
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
