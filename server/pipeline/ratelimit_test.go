package pipeline

import (
	"context"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = DescribeTable("classify puts each operation in a budget",
	func(method, path string, want limitClass) {
		Expect(classify(method, path)).To(Equal(want))
	},
	Entry("GET is a read", http.MethodGet, "/v1/trips", classRead),
	Entry("HEAD is a read", http.MethodHead, "/v1/trips/{tripId}", classRead),
	Entry("a GraphQL query over POST is a read", http.MethodPost, "/v1/graphql", classRead),
	Entry("a GraphQL query over GET is a read", http.MethodGet, "/v1/graphql", classRead),
	Entry("a fare estimate is a write", http.MethodPost, "/v1/fare-estimates", classWrite),
	Entry("booking is a write", http.MethodPost, "/v1/rides", classWrite),
	Entry("PUT is a write", http.MethodPut, "/v1/trips/{tripId}", classWrite),
	Entry("DELETE is a write", http.MethodDelete, "/v1/webhook-endpoints/{endpointId}", classWrite),
)

var _ = Describe("in-process token buckets", func() {
	var (
		now     time.Time
		buckets *memoryBuckets
		limit   = bucketLimit{rate: 5, burst: 10, period: time.Second} // a token every 200 ms
		ctx     = context.Background()
	)
	BeforeEach(func() {
		now = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
		buckets = newMemoryBuckets(func() time.Time { return now })
	})
	take := func(key string) quota {
		q, err := buckets.take(ctx, key, limit)
		Expect(err).NotTo(HaveOccurred())
		return q
	}

	It("holds a burst, then refuses with the wait for the next token", func() {
		for i := range 10 {
			q := take("k")
			Expect(q.allowed).To(BeTrue(), "request %d", i+1)
			Expect(q.limit).To(Equal(10))
			Expect(q.remaining).To(Equal(9 - i))
			Expect(q.reset).To(Equal(time.Duration(i+1) * 200 * time.Millisecond))
		}
		q := take("k")
		Expect(q.allowed).To(BeFalse())
		Expect(q.remaining).To(BeZero())
		Expect(q.retryAfter).To(Equal(200 * time.Millisecond))
		Expect(q.reset).To(Equal(2 * time.Second))
		Expect(take("other").allowed).To(BeTrue(), "buckets are per key")
	})

	DescribeTable("refills at the rate",
		func(wait time.Duration, allowedAfter int) {
			for range 10 {
				take("k")
			}
			now = now.Add(wait)
			allowed := 0
			for take("k").allowed {
				allowed++
			}
			Expect(allowed).To(Equal(allowedAfter))
		},
		Entry("nothing within the first interval", 199*time.Millisecond, 0),
		Entry("one token per interval", 200*time.Millisecond, 1),
		Entry("several", time.Second, 5),
		Entry("never more than the burst", time.Hour, 10),
	)

	It("gives a refunded token back, never beyond a full bucket", func() {
		take("k")
		take("k")
		q, err := buckets.refund(ctx, "k", limit)
		Expect(err).NotTo(HaveOccurred())
		Expect(q.remaining).To(Equal(9))
		q, _ = buckets.refund(ctx, "k", limit)
		Expect(q.remaining).To(Equal(10))
		q, _ = buckets.refund(ctx, "k", limit)
		Expect(q.remaining).To(Equal(10))
		Expect(q.reset).To(BeZero())
	})

	It("forgets keys whose bucket has refilled", func() {
		take("a")
		take("b")
		Expect(buckets.size()).To(Equal(2))
		now = now.Add(memorySweepEvery)
		take("c")
		Expect(buckets.size()).To(Equal(1))
	})
})
