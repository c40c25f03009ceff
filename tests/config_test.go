package tests

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server"
)

var _ = Describe("RIDE_IDEMPOTENCY_TTL", func() {
	env := func(value string) func(string) string {
		return func(name string) string {
			if name == "RIDE_IDEMPOTENCY_TTL" {
				return value
			}
			return ""
		}
	}

	DescribeTable("accepts 24h to 72h, 24h when unset",
		func(value string, want time.Duration) {
			cfg, err := server.ConfigFromEnv(env(value))
			Expect(err).NotTo(HaveOccurred())
			Expect(cfg.IdempotencyTTL).To(Equal(want))
		},
		Entry("unset", "", 24*time.Hour),
		Entry("the lower bound", "24h", 24*time.Hour),
		Entry("in between", "48h30m", 48*time.Hour+30*time.Minute),
		Entry("the upper bound", "72h", 72*time.Hour),
	)

	DescribeTable("refuses anything else, naming the variable",
		func(value string) {
			_, err := server.ConfigFromEnv(env(value))
			Expect(err).To(MatchError(ContainSubstring("RIDE_IDEMPOTENCY_TTL must be a duration from 24h to 72h")))
			Expect(err).To(MatchError(ContainSubstring(value)))
		},
		Entry("too short", "23h59m"),
		Entry("too long", "73h"),
		Entry("no unit", "24"),
		Entry("not a duration", "a day"),
		Entry("negative", "-48h"),
	)

	It("is listed for --help", func() {
		Expect(server.EnvVars).To(ContainElement(HaveField("Name", "RIDE_IDEMPOTENCY_TTL")))
	})
})
