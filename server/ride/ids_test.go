package ride_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server/ride"
)

var _ = Describe("Identifiers", func() {
	It("are the prefix, an underscore and 26 lowercase base32 characters", func() {
		for _, prefix := range []string{
			ride.PrefixTrip, ride.PrefixDriver, ride.PrefixRider, ride.PrefixEstimate, ride.PrefixPayment,
			ride.PrefixReceipt, ride.PrefixCancellation, ride.PrefixWebhookEndpoint, ride.PrefixEvent, ride.PrefixAPIKey,
		} {
			id := ride.NewID(prefix)
			Expect(id).To(MatchRegexp(`^` + prefix + `_[a-z2-7]{26}$`))
			Expect(ride.ValidID(prefix, id)).To(BeTrue(), id)
		}
	})

	It("do not repeat", func() {
		seen := make(map[string]struct{}, 10_000)
		for range 10_000 {
			seen[ride.NewID(ride.PrefixTrip)] = struct{}{}
		}
		Expect(seen).To(HaveLen(10_000))
	})

	DescribeTable("ValidID",
		func(prefix, s string, want bool) {
			Expect(ride.ValidID(prefix, s)).To(Equal(want))
		},
		Entry("canonical", "trp", "trp_"+strings.Repeat("a", 26), true),
		Entry("digits 2-7 allowed", "trp", "trp_234567abcdefghijklmnopqrsa", true),
		Entry("last char with zero spare bits (e = 4)", "trp", "trp_"+strings.Repeat("z", 25)+"e", true),
		Entry("last char with spare bits set (b = 1)", "trp", "trp_"+strings.Repeat("a", 25)+"b", false),
		Entry("other prefix", "drv", "trp_"+strings.Repeat("a", 26), false),
		Entry("prefix only as a prefix of another", "tr", "trp_"+strings.Repeat("a", 25), false),
		Entry("upper case", "trp", "trp_"+strings.Repeat("A", 26), false),
		Entry("digit outside the alphabet", "trp", "trp_"+strings.Repeat("a", 25)+"0", false),
		Entry("digit 1 outside the alphabet", "trp", "trp_1"+strings.Repeat("a", 25), false),
		Entry("too short", "trp", "trp_"+strings.Repeat("a", 25), false),
		Entry("too long", "trp", "trp_"+strings.Repeat("a", 27), false),
		Entry("missing underscore", "trp", "trp-"+strings.Repeat("a", 26), false),
		Entry("empty", "trp", "", false),
		Entry("prefix alone", "trp", "trp_", false),
		Entry("multi-byte rune", "trp", "trp_"+strings.Repeat("a", 24)+"é", false),
	)
})
