package ride_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server/ride"
)

var _ = Describe("Receipt lines", func() {
	// $2.50 base, $1.20/km, $0.30/min, as in the fare examples.
	city := ride.Rates{Currency: "usd", BaseFare: 250, PerKm: 120, PerMinute: 30, MinimumFare: 700}

	lines := func(base, distance, time int64) []ride.LineItem {
		return []ride.LineItem{
			{Kind: ride.LineBaseFare, Amount: base},
			{Kind: ride.LineDistance, Amount: distance},
			{Kind: ride.LineTime, Amount: time},
		}
	}

	DescribeTable("ReceiptLinesForDistance (hand-computed)",
		func(amount, meters int64, r ride.Rates, want []ride.LineItem) {
			Expect(ride.ReceiptLinesForDistance(amount, meters, r)).To(Equal(want))
		},
		// 10 km, 20 min: the rates charge 250 + 1200 + 600 = 2050, so the point price splits
		// exactly along them.
		Entry("the point price splits exactly", int64(2050), int64(10_000), city, lines(250, 1200, 600)),
		// The upfront price 2358: 2358 × 250/2050 = 287.56, × 1200/2050 = 1380.29,
		// × 600/2050 = 690.15 → floors 287 + 1380 + 690 = 2357; the one unit left goes to the
		// largest remainder, the base fare.
		Entry("the upfront price rounds by largest remainder", int64(2358), int64(10_000), city, lines(288, 1380, 690)),
		// 0 m: only the base fare weighs, so a minimum fare is all base fare.
		Entry("a zero-distance minimum fare is all base fare", int64(700), int64(0), city, lines(700, 0, 0)),
		// Rates that charge nothing: everything is the base fare.
		Entry("rates of zero put everything in the base fare", int64(999), int64(5_000), ride.Rates{Currency: "usd"}, lines(999, 0, 0)),
		// Equal weights, 2 units over 3 lines: ties go to the earlier lines.
		Entry("ties go to the earlier lines", int64(2), int64(1_000),
			ride.Rates{BaseFare: 60, PerKm: 60, PerMinute: 30}, lines(1, 1, 0)),
		Entry("a zero amount", int64(0), int64(10_000), city, lines(0, 0, 0)),
	)

	It("always adds up to the amount", func() {
		for amount := int64(0); amount < 3000; amount += 7 {
			for _, meters := range []int64{0, 1, 999, 10_000, 123_457, 40_000_000} {
				var sum int64
				for _, l := range ride.ReceiptLinesForDistance(amount, meters, city) {
					Expect(l.Amount).To(BeNumerically(">=", 0))
					sum += l.Amount
				}
				Expect(sum).To(Equal(amount), "amount %d, %d m", amount, meters)
			}
		}
	})

	It("prices the route from its end points like QuoteFare", func() {
		a, b := ride.Point{Lat: 37.79, Lng: -122.39}, ride.Point{Lat: 37.76, Lng: -122.42}
		q := ride.QuoteFare(a, b, ride.RideEconomy, city)
		Expect(ride.ReceiptLines(q.Max, a, b, city)).To(Equal(ride.ReceiptLinesForDistance(q.Max, q.DistanceMeters, city)))
	})

	It("splits huge amounts without overflow", func() {
		parts := ride.SplitProportionally(1<<62, []int64{1 << 62, 1 << 62, 1})
		Expect(parts[0] + parts[1] + parts[2]).To(Equal(int64(1 << 62)))
		Expect(ride.SplitProportionally(5, nil)).To(BeEmpty())
	})
})

var _ = Describe("Payment rules", func() {
	DescribeTable("CheckPayment",
		func(status ride.TripStatus, amount int64, currency string, want error) {
			err := ride.CheckPayment(status, 1850, "usd", amount, currency)
			if want == nil {
				Expect(err).NotTo(HaveOccurred())
			} else {
				Expect(err).To(MatchError(want))
			}
		},
		Entry("the exact fare of a completed trip", ride.StatusCompleted, int64(1850), "usd", nil),
		Entry("accepted", ride.StatusAccepted, int64(1850), "usd", ride.ErrTripNotCompleted),
		Entry("arriving", ride.StatusArriving, int64(1850), "usd", ride.ErrTripNotCompleted),
		Entry("in progress", ride.StatusInProgress, int64(1850), "usd", ride.ErrTripNotCompleted),
		Entry("cancelled", ride.StatusCancelled, int64(1850), "usd", ride.ErrTripNotCompleted),
		Entry("too little", ride.StatusCompleted, int64(1849), "usd", ride.ErrAmountMismatch),
		Entry("too much", ride.StatusCompleted, int64(1851), "usd", ride.ErrAmountMismatch),
		Entry("another currency", ride.StatusCompleted, int64(1850), "eur", ride.ErrAmountMismatch),
		// The status is checked first: paying too early is the more useful thing to hear.
		Entry("too early and wrong", ride.StatusInProgress, int64(1), "eur", ride.ErrTripNotCompleted),
	)
})
