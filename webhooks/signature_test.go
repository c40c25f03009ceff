package webhooks_test

import (
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/webhooks"
)

var _ = Describe("Signatures", func() {
	var (
		now    = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
		body   = []byte(`{"id":"evt_1","type":"trip.completed","created_at":"2026-11-21T12:00:00Z","data":{"trip_id":"trp_1"}}`)
		secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		old    = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
	)

	DescribeTable("X-Ride-Signature verification",
		func(header func() string, verifyBody []byte, secrets []string, want error) {
			err := webhooks.VerifyAt(verifyBody, header(), secrets, 0, now)
			if want == nil {
				Expect(err).NotTo(HaveOccurred())
			} else {
				Expect(err).To(MatchError(want))
			}
		},
		Entry("valid", func() string { return webhooks.Sign(secret, now, body) }, body, []string{secret}, nil),
		Entry("valid, with clock skew inside the tolerance", func() string { return webhooks.Sign(secret, now.Add(-4*time.Minute), body) }, body, []string{secret}, nil),
		Entry("rotated: two v1, the verifier knows only the new secret",
			func() string { return webhooks.SignAll([]string{secret, old}, now, body) }, body, []string{secret}, nil),
		Entry("rotated: two v1, the verifier knows only the old secret",
			func() string { return webhooks.SignAll([]string{secret, old}, now, body) }, body, []string{old}, nil),
		Entry("rotated: one v1, the verifier knows both secrets",
			func() string { return webhooks.Sign(old, now, body) }, body, []string{secret, old}, nil),
		Entry("tampered body", func() string { return webhooks.Sign(secret, now, body) },
			[]byte(strings.Replace(string(body), "trp_1", "trp_2", 1)), []string{secret}, webhooks.ErrNoValidSignature),
		Entry("wrong secret", func() string { return webhooks.Sign(old, now, body) }, body, []string{secret}, webhooks.ErrNoValidSignature),
		Entry("no secrets", func() string { return webhooks.Sign(secret, now, body) }, body, []string{}, webhooks.ErrNoValidSignature),
		Entry("too old", func() string { return webhooks.Sign(secret, now.Add(-6*time.Minute), body) }, body, []string{secret}, webhooks.ErrTimestampTooOld),
		Entry("too new", func() string { return webhooks.Sign(secret, now.Add(6*time.Minute), body) }, body, []string{secret}, webhooks.ErrTimestampTooNew),
		Entry("absurdly old timestamp", func() string { return "t=-9223372036854775808,v1=" + strings.Repeat("0", 64) }, body, []string{secret}, webhooks.ErrTimestampTooOld),
		Entry("absurdly new timestamp", func() string { return "t=9223372036854775807,v1=" + strings.Repeat("0", 64) }, body, []string{secret}, webhooks.ErrTimestampTooNew),
		Entry("missing header", func() string { return "" }, body, []string{secret}, webhooks.ErrMissingHeader),
		Entry("malformed: no t", func() string { return "v1=" + strings.Repeat("a", 64) }, body, []string{secret}, webhooks.ErrMalformedHeader),
		Entry("malformed: no v1", func() string { return "t=1700000000" }, body, []string{secret}, webhooks.ErrMalformedHeader),
		Entry("malformed: t not a number", func() string { return "t=yesterday,v1=" + strings.Repeat("a", 64) }, body, []string{secret}, webhooks.ErrMalformedHeader),
		Entry("malformed: v1 not hex", func() string { return "t=1700000000,v1=zz" }, body, []string{secret}, webhooks.ErrMalformedHeader),
		Entry("malformed: repeated t", func() string { return "t=1,t=2,v1=" + strings.Repeat("a", 64) }, body, []string{secret}, webhooks.ErrMalformedHeader),
		Entry("malformed: garbage", func() string { return "garbage" }, body, []string{secret}, webhooks.ErrMalformedHeader),
		Entry("unknown schemes are skipped", func() string {
			return strings.Replace(webhooks.Sign(secret, now, body), ",v1=", ",v0=deadbeef,v1=", 1)
		}, body, []string{secret}, nil),
	)

	It("uses the given tolerance in both directions", func() {
		header := webhooks.Sign(secret, now.Add(-90*time.Second), body)
		Expect(webhooks.VerifyAt(body, header, []string{secret}, time.Minute, now)).To(MatchError(webhooks.ErrTimestampTooOld))
		Expect(webhooks.VerifyAt(body, header, []string{secret}, 2*time.Minute, now)).To(Succeed())
		header = webhooks.Sign(secret, now.Add(90*time.Second), body)
		Expect(webhooks.VerifyAt(body, header, []string{secret}, time.Minute, now)).To(MatchError(webhooks.ErrTimestampTooNew))
	})

	It("signs t=<unix seconds>,v1=<lowercase hex HMAC-SHA256 of \"<t>.<body>\"> keyed with the whole secret", func() {
		// Computed independently: printf '%s' '1700000000.{}' | openssl dgst -sha256 -hmac 'whsec_test'
		Expect(webhooks.Sign("whsec_test", time.Unix(1700000000, 0), []byte("{}"))).To(Equal(
			"t=1700000000,v1=" + hmacHex("whsec_test", "1700000000.{}")))
		Expect(webhooks.SignAll([]string{"a", "b"}, time.Unix(5, 0), []byte("x"))).To(MatchRegexp(`^t=5,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$`))
	})

	Describe("Standard Webhooks", func() {
		It("signs v1,<base64> over <id>.<ts>.<body> keyed with the decoded secret, and verifies", func() {
			// The example of the Standard Webhooks specification.
			sig, err := webhooks.SignStandard([]string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
				"msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0),
				[]byte(`{"test": 2432232314}`))
			Expect(err).NotTo(HaveOccurred())
			Expect(sig).To(Equal("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="))
		})

		It("carries one signature per secret and verifies with either", func() {
			h, err := webhooks.Headers("evt_1", "trip.completed", 1, now, body, []string{secret, old})
			Expect(err).NotTo(HaveOccurred())
			Expect(h.Get("webhook-id")).To(Equal("evt_1"))
			Expect(strings.Fields(h.Get("webhook-signature"))).To(HaveLen(2))
			for _, s := range []string{secret, old} {
				Expect(webhooks.VerifyStandardAt(body, h, []string{s}, 0, now)).To(Succeed())
				Expect(webhooks.VerifyAt(body, h.Get(webhooks.HeaderSignature), []string{s}, 0, now)).To(Succeed())
			}
			Expect(webhooks.VerifyStandardAt([]byte("{}"), h, []string{secret}, 0, now)).To(MatchError(webhooks.ErrNoValidSignature))
			Expect(webhooks.VerifyStandardAt(body, h, []string{secret}, 0, now.Add(10*time.Minute))).To(MatchError(webhooks.ErrTimestampTooOld))
			Expect(webhooks.VerifyStandardAt(body, http.Header{}, []string{secret}, 0, now)).To(MatchError(webhooks.ErrMissingHeader))
		})

		It("refuses a secret that is not whsec_<base64>", func() {
			_, err := webhooks.SignStandard([]string{"whsec_not base64!"}, "evt_1", now, body)
			Expect(err).To(MatchError(webhooks.ErrInvalidSecret))
		})
	})

	It("makes whsec_ secrets of 32 random bytes", func() {
		a, b := webhooks.NewSecret(), webhooks.NewSecret()
		Expect(a).To(MatchRegexp(`^whsec_[A-Za-z0-9+/]{43}=$`))
		Expect(a).NotTo(Equal(b))
	})
})
