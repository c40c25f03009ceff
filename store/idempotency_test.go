package store_test

import (
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/store"
)

var _ = Describe("Idempotency records", func() {
	forEachEngine(func(e *testEngine) {
		var now time.Time
		claim := func(key, fingerprint, owner string) store.IdempotencyClaim {
			return store.IdempotencyClaim{
				Account: "acct_test", Key: key, Fingerprint: fingerprint, Method: "POST", Path: "/v1/payments",
				Owner: owner, Now: now, StaleBefore: now.Add(-time.Minute),
			}
		}
		BeforeEach(func() { now = time.Now().UTC().Truncate(time.Microsecond) })

		It("gives a new key to its first claimer and reports it pending to the next", func(ctx SpecContext) {
			rec, claimed, err := e.shared.ClaimIdempotencyKey(ctx, claim("k1", "fp", "owner-a"))
			Expect(err).NotTo(HaveOccurred())
			Expect(claimed).To(BeTrue())
			Expect(rec.Status).To(Equal(store.IdempotencyPending))

			rec, claimed, err = e.shared.ClaimIdempotencyKey(ctx, claim("k1", "fp", "owner-b"))
			Expect(err).NotTo(HaveOccurred())
			Expect(claimed).To(BeFalse())
			Expect(rec.Owner).To(Equal("owner-a"))
			Expect(rec.Status).To(Equal(store.IdempotencyPending))
		})

		It("stores the answer only for the owner, and then replays it to everyone", func(ctx SpecContext) {
			_, _, err := e.shared.ClaimIdempotencyKey(ctx, claim("k2", "fp", "owner-a"))
			Expect(err).NotTo(HaveOccurred())
			result := store.IdempotencyResult{Account: "acct_test", Key: "k2", Owner: "owner-b", Status: 201,
				Headers: `{"Content-Type":["application/json"]}`, Body: []byte("{\"id\":1}\n"), Now: now}
			Expect(e.shared.CompleteIdempotencyRecord(ctx, result)).To(MatchError(store.ErrConflict))
			result.Owner = "owner-a"
			Expect(e.shared.CompleteIdempotencyRecord(ctx, result)).To(Succeed())
			Expect(e.shared.CompleteIdempotencyRecord(ctx, result)).To(MatchError(store.ErrConflict), "completed once")

			rec, claimed, err := e.shared.ClaimIdempotencyKey(ctx, claim("k2", "fp", "owner-c"))
			Expect(err).NotTo(HaveOccurred())
			Expect(claimed).To(BeFalse())
			Expect(rec.Status).To(Equal(store.IdempotencyCompleted))
			Expect(*rec.ResponseStatus).To(Equal(201))
			Expect(rec.ResponseBody).To(Equal([]byte("{\"id\":1}\n")))
			Expect(*rec.ResponseHeaders).To(Equal(`{"Content-Type":["application/json"]}`))
		})

		It("commits the answer with the transaction that completes it, or not at all", func(ctx SpecContext) {
			_, _, err := e.shared.ClaimIdempotencyKey(ctx, claim("k3", "fp", "owner-a"))
			Expect(err).NotTo(HaveOccurred())
			boom := fmt.Errorf("boom")
			err = e.shared.WithTx(ctx, func(tx *store.Store) error {
				Expect(tx.CompleteIdempotencyRecord(ctx, store.IdempotencyResult{
					Account: "acct_test", Key: "k3", Owner: "owner-a", Status: 201, Headers: "{}", Now: now,
				})).To(Succeed())
				return boom
			})
			Expect(err).To(MatchError(boom))
			rec, err := e.shared.IdempotencyRecordByKey(ctx, "acct_test", "k3")
			Expect(err).NotTo(HaveOccurred())
			Expect(rec.Status).To(Equal(store.IdempotencyPending))
		})

		It("lets a failed or expired key be taken over with the same fingerprint only", func(ctx SpecContext) {
			_, _, err := e.shared.ClaimIdempotencyKey(ctx, claim("k4", "fp", "owner-a"))
			Expect(err).NotTo(HaveOccurred())
			Expect(e.shared.FailIdempotencyRecord(ctx, "acct_test", "k4", "owner-a")).To(Succeed())

			rec, claimed, err := e.shared.ClaimIdempotencyKey(ctx, claim("k4", "other", "owner-b"))
			Expect(err).NotTo(HaveOccurred())
			Expect(claimed).To(BeFalse())
			Expect(rec.Fingerprint).To(Equal("fp"))

			_, claimed, err = e.shared.ClaimIdempotencyKey(ctx, claim("k4", "fp", "owner-b"))
			Expect(err).NotTo(HaveOccurred())
			Expect(claimed).To(BeTrue())

			// owner-b "crashes": within the lease the key stays in flight, after it anyone may
			// take over, and owner-b can no longer complete it.
			_, claimed, err = e.shared.ClaimIdempotencyKey(ctx, claim("k4", "fp", "owner-c"))
			Expect(err).NotTo(HaveOccurred())
			Expect(claimed).To(BeFalse())
			later := claim("k4", "fp", "owner-c")
			later.Now, later.StaleBefore = now.Add(2*time.Minute), now.Add(time.Minute)
			_, claimed, err = e.shared.ClaimIdempotencyKey(ctx, later)
			Expect(err).NotTo(HaveOccurred())
			Expect(claimed).To(BeTrue())
			Expect(e.shared.CompleteIdempotencyRecord(ctx, store.IdempotencyResult{
				Account: "acct_test", Key: "k4", Owner: "owner-b", Status: 201, Headers: "{}", Now: now,
			})).To(MatchError(store.ErrConflict))
		})

		It("scopes keys by account", func(ctx SpecContext) {
			a := claim("shared", "fp-a", "owner-a")
			b := claim("shared", "fp-b", "owner-b")
			b.Account = "acct_other"
			_, claimedA, err := e.shared.ClaimIdempotencyKey(ctx, a)
			Expect(err).NotTo(HaveOccurred())
			_, claimedB, err := e.shared.ClaimIdempotencyKey(ctx, b)
			Expect(err).NotTo(HaveOccurred())
			Expect([]bool{claimedA, claimedB}).To(Equal([]bool{true, true}))
		})

		It("gives a new key to exactly one of many concurrent claimers", func(ctx SpecContext) {
			var wg sync.WaitGroup
			claimed := make([]bool, 20)
			for i := range claimed {
				wg.Go(func() {
					defer GinkgoRecover()
					var err error
					_, claimed[i], err = e.shared.ClaimIdempotencyKey(ctx, claim("race", "fp", fmt.Sprint("owner-", i)))
					Expect(err).NotTo(HaveOccurred())
				})
			}
			wg.Wait()
			n := 0
			for _, c := range claimed {
				if c {
					n++
				}
			}
			Expect(n).To(Equal(1))
		})

		It("purges the records created before the cutoff and keeps the rest", func(ctx SpecContext) {
			for i, age := range []time.Duration{25 * time.Hour, 24*time.Hour + time.Microsecond, 24 * time.Hour, time.Hour, 0} {
				c := claim(fmt.Sprint("age-", i), "fp", "owner")
				c.Now = now.Add(-age)
				_, claimed, err := e.shared.ClaimIdempotencyKey(ctx, c)
				Expect(err).NotTo(HaveOccurred())
				Expect(claimed).To(BeTrue())
			}
			// A key first used long ago and retried (after a failure) an hour ago is kept.
			retried := claim("age-5", "fp", "owner")
			retried.Now = now.Add(-30 * time.Hour)
			_, _, err := e.shared.ClaimIdempotencyKey(ctx, retried)
			Expect(err).NotTo(HaveOccurred())
			Expect(e.shared.FailIdempotencyRecord(ctx, "acct_test", "age-5", "owner")).To(Succeed())
			retried.Now, retried.Owner = now.Add(-time.Hour), "owner-2"
			_, claimed, err := e.shared.ClaimIdempotencyKey(ctx, retried)
			Expect(err).NotTo(HaveOccurred())
			Expect(claimed).To(BeTrue())

			n, err := e.shared.PurgeIdempotencyRecords(ctx, now.Add(-24*time.Hour))
			Expect(err).NotTo(HaveOccurred())
			Expect(n).To(BeEquivalentTo(2))
			for i, kept := range []bool{false, false, true, true, true, true} {
				_, err := e.shared.IdempotencyRecordByKey(ctx, "acct_test", fmt.Sprint("age-", i))
				if kept {
					Expect(err).NotTo(HaveOccurred(), "age-%d", i)
				} else {
					Expect(err).To(MatchError(store.ErrNotFound), "age-%d", i)
				}
			}
		})

		It("purges in batches", func(ctx SpecContext) {
			old := now.Add(-48 * time.Hour)
			rows := make([]store.IdempotencyRecord, 2500)
			for i := range rows {
				rows[i] = store.IdempotencyRecord{Account: "acct_bulk", Key: fmt.Sprint("bulk-", i), Fingerprint: "fp",
					Method: "POST", Path: "/v1/payments", Status: store.IdempotencyFailed, Owner: "o", LockedAt: old, CreatedAt: old}
			}
			Expect(e.shared.TestDB().WithContext(ctx).CreateInBatches(rows, 500).Error).To(Succeed())
			n, err := e.shared.PurgeIdempotencyRecords(ctx, now.Add(-24*time.Hour))
			Expect(err).NotTo(HaveOccurred())
			Expect(n).To(BeEquivalentTo(2500))
		})
	})
})
