package tests

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/store/storetest"
	"github.com/rideapi/ride/webhooks/delivery"
)

var _ = ForEachEngine("Webhook durability", func(h *Harness) {
	It("delivers an event committed while no worker ran, once a server starts again", func(ctx SpecContext) {
		a := h.IsolatedHarness(ctx, testConfig(), true)
		receiver := NewReceiver(nil)
		a.RegisterEndpointKept(receiver.URL, "trip.completed")
		a.StopWorker()

		event := a.AppendEvent("trip.completed") // committed; no worker is running
		Expect(receiver.Calls()).To(BeEmpty())

		started := time.Now()
		a.ServerOn(ctx, a.DatabaseURL, testConfig(), true)
		Eventually(func() []Call { return receiver.CallsFor(event.ID) }).
			WithTimeout(firstAttemptWithin).WithPolling(pollEvery).Should(HaveLen(1))
		Expect(receiver.CallsFor(event.ID)[0].Attempt).To(Equal(1))
		AddReportEntry(fmt.Sprintf("restart [%s]", h.Engine), fmt.Sprintf(
			"event committed while no worker ran: delivered (attempt 1) %s after the next server started",
			receiver.CallsFor(event.ID)[0].At.Sub(started).Round(time.Millisecond)))
	})

	It("lets the attempts in flight finish on a graceful stop: the next server sends none of them again", func(ctx SpecContext) {
		a := h.IsolatedHarness(ctx, testConfig(), true)
		const inFlight = 16 // all in flight at once: fewer than the worker's slots
		receiver := NewReceiver(func(Call) Answer { return Answer{Status: http.StatusOK, Delay: 500 * time.Millisecond} })
		id, _ := a.RegisterEndpointKept(receiver.URL, "trip.completed")
		for range inFlight {
			a.AppendEvent("trip.completed")
		}
		Eventually(func() []Call { return receiver.Calls() }).WithTimeout(firstAttemptWithin).WithPolling(pollEvery).Should(HaveLen(inFlight))
		a.StopWorker() // while every one of them waits for its answer

		b := a.ServerOn(ctx, a.DatabaseURL, testConfig(), true)
		Expect(b.Deliveries(id)).To(HaveLen(inFlight))
		for _, d := range b.Deliveries(id) {
			Expect(d).To(And(HaveKeyWithValue("attempt", 1.0), HaveKeyWithValue("status", "succeeded")))
		}
		Consistently(func() []Call { return receiver.Calls() }, time.Second, pollEvery).Should(HaveLen(inFlight), "no attempt sent twice")
	})

	It("resumes an attempt cut off after the drain of a shutdown, in the next server, as the next attempt", func(ctx SpecContext) {
		cfg := testConfig()
		cfg.WebhookDrain = 100 * time.Millisecond // shorter than the hang below
		a := h.IsolatedHarness(ctx, cfg, true)
		receiver := NewReceiver(func(c Call) Answer {
			if c.Nth == 1 {
				return Answer{Hang: true} // the server stops while this attempt is in flight
			}
			return Answer{Status: http.StatusOK}
		})
		id, _ := a.RegisterEndpointKept(receiver.URL, "trip.completed")
		event := a.AppendEvent("trip.completed")
		Eventually(func() []Call { return receiver.CallsFor(event.ID) }).
			WithTimeout(firstAttemptWithin).WithPolling(pollEvery).Should(HaveLen(1))
		a.StopWorker()

		started := time.Now()
		b := a.ServerOn(ctx, a.DatabaseURL, testConfig(), true)
		Eventually(func() []Call { return receiver.CallsFor(event.ID) }).
			WithTimeout(firstAttemptWithin).WithPolling(pollEvery).Should(HaveLen(2))
		Expect(receiver.CallsFor(event.ID)[1].Attempt).To(Equal(2))
		AddReportEntry(fmt.Sprintf("interrupted attempt [%s]", h.Engine), fmt.Sprintf(
			"attempt 1 cut off by a shutdown; attempt 2 delivered %s after the next server started",
			receiver.CallsFor(event.ID)[1].At.Sub(started).Round(time.Millisecond)))
		Eventually(func() []map[string]any { return b.Deliveries(id) }).
			WithTimeout(firstAttemptWithin).WithPolling(pollEvery).Should(ConsistOf(
			And(HaveKeyWithValue("attempt", 2.0), HaveKeyWithValue("status", "succeeded")),
			And(HaveKeyWithValue("attempt", 1.0), HaveKeyWithValue("status", "pending"),
				HaveKeyWithValue("error", ContainSubstring("interrupted"))),
		))
	})

	It("takes over a delivery whose worker died after claiming it, once the lease runs out", func(ctx SpecContext) {
		a := h.IsolatedHarness(ctx, testConfig(), false)
		receiver := NewReceiver(nil)
		a.RegisterEndpointKept(receiver.URL, "trip.completed")
		event := a.AppendEvent("trip.completed")

		// A worker that claims, then dies without sending or recording anything.
		now := time.Now()
		claimed, err := a.Store.ClaimDeliveries(ctx, delivery.ClaimParams{Now: now, LeaseUntil: now.Add(2 * time.Second), Limit: 10})
		Expect(err).NotTo(HaveOccurred())
		Expect(claimed).To(HaveLen(1))
		Expect(claimed[0].Attempt).To(Equal(1))

		b := a.ServerOn(ctx, a.DatabaseURL, testConfig(), true)
		Eventually(func() []Call { return receiver.CallsFor(event.ID) }).
			WithTimeout(firstAttemptWithin).WithPolling(pollEvery).Should(HaveLen(1))
		call := receiver.CallsFor(event.ID)[0]
		Expect(call.Attempt).To(Equal(2), "attempt 1 may have been sent by the dead worker: never reuse its number")
		Expect(call.At).To(BeTemporally(">=", now.Add(2*time.Second)), "not before the lease ran out")
		// The dead worker's attempt is in the log, as lost, before the one that took over.
		Eventually(func() []map[string]any { return b.Deliveries(claimed[0].EndpointID) }).
			WithTimeout(firstAttemptWithin).WithPolling(pollEvery).Should(HaveExactElements(
			And(HaveKeyWithValue("attempt", 2.0), HaveKeyWithValue("status", "succeeded")),
			And(HaveKeyWithValue("attempt", 1.0), HaveKeyWithValue("status", "pending"),
				HaveKeyWithValue("error", ContainSubstring("lost")), HaveKeyWithValue("response_status", BeNil()))))
		AddReportEntry(fmt.Sprintf("lease takeover [%s]", h.Engine), fmt.Sprintf(
			"claim abandoned with a 2s lease; taken over as attempt 2 after %s", call.At.Sub(now).Round(time.Millisecond)))
	})

	It("never lets two workers on one database send the same attempt twice", func(ctx SpecContext) {
		a := h.IsolatedHarness(ctx, testConfig(), true)
		b := a.ServerOn(ctx, a.DatabaseURL, testConfig(), true)
		receiver := NewReceiver(func(c Call) Answer {
			if c.Attempt == 1 {
				return Answer{Status: http.StatusInternalServerError} // every event needs a retry
			}
			return Answer{Status: http.StatusOK}
		})
		a.RegisterEndpointKept(receiver.URL, "trip.created", "trip.completed")

		const events = 100
		var ids []string
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range events {
			writer := []*Harness{a, b}[i%2]
			wg.Go(func() {
				defer GinkgoRecover()
				e := writer.AppendEvent([]string{"trip.created", "trip.completed"}[i%2])
				mu.Lock()
				ids = append(ids, e.ID)
				mu.Unlock()
			})
		}
		wg.Wait()

		acknowledged := func() int {
			n := 0
			for _, c := range receiver.Calls() {
				if c.Attempt >= 2 {
					n++
				}
			}
			return n
		}
		Eventually(acknowledged).WithTimeout(retriesWithin).WithPolling(pollEvery).Should(BeNumerically(">=", events))

		receipts := map[string]int{}
		for _, c := range receiver.Calls() {
			receipts[fmt.Sprintf("%s#%d", c.EventID, c.Attempt)]++
		}
		for key, n := range receipts {
			Expect(n).To(Equal(1), "attempt %s was received %d times", key, n)
		}
		for _, id := range ids {
			attempts := []int{}
			for _, c := range receiver.CallsFor(id) {
				attempts = append(attempts, c.Attempt)
			}
			slices.Sort(attempts)
			Expect(attempts).To(Equal([]int{1, 2}), id)
		}
		AddReportEntry(fmt.Sprintf("two workers [%s]", h.Engine),
			fmt.Sprintf("%d events, %d receipts, every (event, attempt) received once", events, len(receiver.Calls())))
	})

	if h.Engine == "postgres" {
		It("delivers at once while other transactions stay open, in this database and in another", func(ctx SpecContext) {
			receiver := NewReceiver(nil)
			h.RegisterEndpoint(receiver.URL, "trip.created", "trip.arriving")
			// An operator's forgotten session in a scratch database of the same server, and one
			// idle in a transaction in this one: each has written, so each holds a transaction id.
			scratch, drop, err := storetest.NewPostgresDatabase(ctx, os.Getenv("TEST_DATABASE_URL"))
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(drop)
			for _, url := range []string{scratch, h.DatabaseURL} {
				conn, err := pgx.Connect(ctx, url)
				Expect(err).NotTo(HaveOccurred())
				DeferCleanup(func(ctx SpecContext) { _ = conn.Close(ctx) })
				_, err = conn.Exec(ctx, "BEGIN; CREATE TEMPORARY TABLE scratch (n int); INSERT INTO scratch VALUES (1)")
				Expect(err).NotTo(HaveOccurred())
			}

			city := h.NewCity(CityOpts{})
			h.NewDriver(DriverOpts{City: city.ID})
			key := h.Key(auth.RoleRider, h.NewRider().ID)
			trip := h.BookTrip(key, h.NewEstimate(key, city).EstimateId)
			driverKey := h.Key(auth.RoleDriver, trip.DriverSummary.Id)
			Expect(h.PutStatus(driverKey, trip.Id, "arriving", nil).Status).To(Equal(http.StatusOK))

			kinds := func() (kinds []string) {
				for _, c := range receiver.Calls() {
					kinds = append(kinds, c.Header.Get("X-Ride-Event"))
				}
				return kinds
			}
			Eventually(kinds).WithTimeout(firstAttemptWithin).WithPolling(pollEvery).
				Should(ConsistOf("trip.created", "trip.arriving"), "the open transactions still run")
		})
	}

	It("measures first-attempt latency from commit to receiver", Label("latency"), func(ctx SpecContext) {
		a := h.IsolatedHarness(ctx, testConfig(), true)
		receiver := NewReceiver(nil)
		a.RegisterEndpointKept(receiver.URL, "trip.completed")

		const events = 300
		committed := map[string]time.Time{}
		for range events {
			e := a.AppendEvent("trip.completed")
			committed[e.ID] = time.Now()      // AppendEvent returns after the commit
			time.Sleep(10 * time.Millisecond) // pacing, not an assertion: commits spread over ~3s
		}
		Eventually(func() int { return len(receiver.Calls()) }).
			WithTimeout(retriesWithin).WithPolling(pollEvery).Should(Equal(events))

		var latencies []time.Duration
		for _, c := range receiver.Calls() {
			latencies = append(latencies, c.At.Sub(committed[c.EventID]))
		}
		slices.Sort(latencies)
		at := func(q float64) time.Duration {
			return latencies[min(len(latencies)-1, int(q*float64(len(latencies))))].Round(100 * time.Microsecond)
		}
		figures := fmt.Sprintf("%d events: p50 %s, p90 %s, p99 %s, max %s",
			events, at(0.50), at(0.90), at(0.99), latencies[len(latencies)-1].Round(100*time.Microsecond))
		AddReportEntry(fmt.Sprintf("first-attempt latency, commit to receiver [%s]", h.Engine), figures)
		fmt.Fprintf(GinkgoWriter, "first-attempt latency [%s]: %s\n", h.Engine, figures)
	})
})
