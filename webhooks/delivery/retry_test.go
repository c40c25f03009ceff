package delivery_test

import (
	"math"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/webhooks/delivery"
)

var _ = Describe("Retries", func() {
	contract := delivery.RetryPolicy{} // the defaults are the contract's schedule and horizon

	DescribeTable("the delay after a failed attempt is bounded for any attempt number",
		func(attempt int, want time.Duration) {
			Expect(contract.Delay(attempt)).To(Equal(want))
		},
		Entry("attempt 0 counts as the first", 0, time.Minute),
		Entry("negative attempt numbers too", math.MinInt, time.Minute),
		Entry("after attempt 1", 1, time.Minute),
		Entry("after attempt 2", 2, 5*time.Minute),
		Entry("after attempt 3", 3, 30*time.Minute),
		Entry("after attempt 4", 4, 2*time.Hour),
		Entry("after attempt 5", 5, 5*time.Hour),
		Entry("after attempt 6", 6, 10*time.Hour),
		Entry("the last entry repeats", 7, 10*time.Hour),
		Entry("no overflow at 1,000", 1000, 10*time.Hour),
		Entry("no overflow at MaxInt", math.MaxInt, 10*time.Hour),
	)

	event := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)

	DescribeTable("the next attempt",
		func(policy delivery.RetryPolicy, elapsed time.Duration, attempt int, retryAfter time.Duration, wantAfter time.Duration, wantOK bool) {
			next, ok := policy.Next(event, event.Add(elapsed), attempt, retryAfter)
			Expect(ok).To(Equal(wantOK))
			if ok {
				Expect(next.Sub(event)).To(Equal(wantAfter))
			}
		},
		Entry("follows the schedule", contract, 0*time.Second, 1, time.Duration(0), time.Minute, true),
		Entry("grows", contract, 6*time.Minute, 2, time.Duration(0), 11*time.Minute, true),
		Entry("a shorter Retry-After does not shorten it", contract, 6*time.Minute, 2, time.Second, 11*time.Minute, true),
		Entry("a longer Retry-After is honoured", contract, 6*time.Minute, 2, time.Hour, 66*time.Minute, true),
		Entry("a Retry-After beyond the horizon is honoured up to the horizon", contract, time.Hour, 2, 1000*time.Hour, 24*time.Hour, true),
		Entry("the schedule is cut at the horizon for a last attempt", contract, 20*time.Hour, 7, time.Duration(0), 24*time.Hour, true),
		Entry("nothing after the horizon", contract, 24*time.Hour, 8, time.Duration(0), time.Duration(0), false),
		Entry("a huge Retry-After does not overflow", contract, time.Hour, 1, time.Duration(math.MaxInt64), 24*time.Hour, true),
		Entry("a second-scale schedule", delivery.RetryPolicy{Schedule: []time.Duration{time.Second, 2 * time.Second}, Horizon: time.Minute},
			10*time.Second, 5, time.Duration(0), 12*time.Second, true),
	)

	DescribeTable("Retry-After is read as seconds or an HTTP date, clamped",
		func(header string, want time.Duration) {
			now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
			Expect(delivery.RetryAfter(header, now, 24*time.Hour)).To(Equal(want))
		},
		Entry("absent", "", time.Duration(0)),
		Entry("seconds", "120", 2*time.Minute),
		Entry("an HTTP date", time.Date(2026, 11, 21, 12, 30, 0, 0, time.UTC).Format(http.TimeFormat), 30*time.Minute),
		Entry("a date in the past", time.Date(2026, 11, 21, 11, 0, 0, 0, time.UTC).Format(http.TimeFormat), time.Duration(0)),
		Entry("more than the limit", "999999", 24*time.Hour),
		Entry("more than uint64 holds", "99999999999999999999999", 24*time.Hour),
		Entry("negative", "-5", time.Duration(0)),
		Entry("garbage", "soon", time.Duration(0)),
	)

	It("reads a schedule and names what is wrong", func() {
		s, err := delivery.ParseSchedule("1s, 2s,1m")
		Expect(err).NotTo(HaveOccurred())
		Expect(s).To(Equal([]time.Duration{time.Second, 2 * time.Second, time.Minute}))
		_, err = delivery.ParseSchedule("1s,soon")
		Expect(err).To(MatchError(ContainSubstring(`"soon"`)))
		_, err = delivery.ParseSchedule("0s")
		Expect(err).To(MatchError(ContainSubstring("not positive")))
	})
})
