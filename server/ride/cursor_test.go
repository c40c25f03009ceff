package ride_test

import (
	"math"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server/ride"
)

var _ = Describe("Cursors", func() {
	var codec *ride.CursorCodec

	BeforeEach(func() {
		codec = ride.NewCursorCodec(testSecret)
	})

	DescribeTable("round trip",
		func(cur ride.Cursor) {
			s := codec.Encode(cur, testQuery)
			Expect(s).To(MatchRegexp(`^[A-Za-z0-9_-]+$`), "unpadded base64url")
			Expect(len(s)).To(BeNumerically("<=", ride.MaxCursorLength))
			Expect(codec.Decode(s, testQuery)).To(Equal(cur))
			Expect(codec.Encode(cur, testQuery)).To(Equal(s), "deterministic")
		},
		Entry("forward", ride.Cursor{Values: []int64{1_700_000_000_000_000}, ID: "trp_abcdefghijklmnopqrstuvwxyz"}),
		Entry("backward", ride.Cursor{Backward: true, Values: []int64{42, 7}, ID: "trp_x"}),
		Entry("negative values", ride.Cursor{Values: []int64{-1, -62_135_596_800_000_000}, ID: "evt_y"}),
		Entry("int64 extremes", ride.Cursor{Values: []int64{math.MaxInt64, math.MinInt64, 0}, ID: "trp_z"}),
		Entry("empty id", ride.Cursor{Values: []int64{1}}),
		Entry("no values", ride.Cursor{ID: "trp_a"}),
		Entry("nothing at all", ride.Cursor{}),
		Entry("largest allowed", ride.Cursor{
			Backward: true,
			Values:   []int64{math.MinInt64, math.MinInt64, math.MinInt64, math.MinInt64, math.MinInt64, math.MinInt64, math.MinInt64, math.MinInt64},
			ID:       strings.Repeat("\xff", ride.MaxCursorIDLength),
		}),
	)

	valid := func() string {
		return ride.NewCursorCodec(testSecret).Encode(ride.Cursor{Values: []int64{1_700_000_000_000_000, 1850}, ID: "trp_abc"}, testQuery)
	}

	DescribeTable("rejects hostile input without panicking",
		func(s func() string, query string) {
			var err error
			Expect(func() { _, err = codec.Decode(s(), query) }).NotTo(Panic())
			Expect(err).To(MatchError(ride.ErrInvalidCursor))
		},
		Entry("empty", func() string { return "" }, testQuery),
		Entry("not base64", func() string { return "!!!!****" }, testQuery),
		Entry("standard base64 alphabet", func() string { return strings.NewReplacer("-", "+", "_", "/").Replace(valid()) + "+/" }, testQuery),
		Entry("padded", func() string { return valid() + "==" }, testQuery),
		Entry("newline inside (ignored by the decoder)", func() string { s := valid(); return s[:8] + "\n" + s[8:] }, testQuery),
		Entry("spare bits set in the last character", func() string {
			// 4-byte payload + 16-byte MAC = 20 bytes: the last of 27 characters
			// carries 4 data bits and 2 spare bits; setting a spare bit keeps the
			// bytes and changes the text.
			s := ride.NewCursorCodec(testSecret).Encode(ride.Cursor{}, testQuery)
			const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
			last := strings.IndexByte(alphabet, s[len(s)-1])
			return s[:len(s)-1] + string(alphabet[last|1])
		}, testQuery),
		Entry("truncated", func() string { s := valid(); return s[:len(s)-3] }, testQuery),
		Entry("truncated by a byte", func() string {
			return mutateRaw(valid(), func(b []byte) []byte { return b[:len(b)-1] })
		}, testQuery),
		Entry("only a MAC's worth of bytes", func() string { return strings.Repeat("A", 22) }, testQuery),
		Entry("flipped bit in the payload", func() string {
			return mutateRaw(valid(), func(b []byte) []byte { b[3] ^= 0x01; return b })
		}, testQuery),
		Entry("flipped direction flag", func() string {
			return mutateRaw(valid(), func(b []byte) []byte { b[1] ^= 0x01; return b })
		}, testQuery),
		Entry("flipped bit in the MAC", func() string {
			return mutateRaw(valid(), func(b []byte) []byte { b[len(b)-1] ^= 0x80; return b })
		}, testQuery),
		Entry("from another query", valid, testQuery+"&city=paris"),
		Entry("from another caller", valid, strings.Replace(testQuery, "rdr_x", "rdr_y", 1)),
		Entry("from another secret", func() string {
			return ride.NewCursorCodec([]byte("another secret")).Encode(ride.Cursor{ID: "trp_abc"}, testQuery)
		}, testQuery),
		Entry("over-long", func() string { return strings.Repeat("A", ride.MaxCursorLength+1) }, testQuery),
		Entry("longest allowed length of junk", func() string { return strings.Repeat("A", ride.MaxCursorLength) }, testQuery),
		Entry("garbage appended", func() string { return valid() + "AAAA" }, testQuery),
		Entry("bytes appended", func() string {
			return mutateRaw(valid(), func(b []byte) []byte { return append(b, 0) })
		}, testQuery),

		// Authenticated with the right secret but malformed inside: the parser
		// must still hold.
		Entry("sealed: too short", func() string { return seal(testSecret, []byte{1, 0}, testQuery) }, testQuery),
		Entry("sealed: unknown version", func() string { return seal(testSecret, []byte{2, 0, 0, 0}, testQuery) }, testQuery),
		Entry("sealed: version zero", func() string { return seal(testSecret, []byte{0, 0, 0, 0}, testQuery) }, testQuery),
		Entry("sealed: unknown flag", func() string { return seal(testSecret, []byte{1, 2, 0, 0}, testQuery) }, testQuery),
		Entry("sealed: huge varint count", func() string {
			return seal(testSecret, []byte{1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0}, testQuery)
		}, testQuery),
		Entry("sealed: overflowing varint count", func() string {
			return seal(testSecret, []byte{1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0}, testQuery)
		}, testQuery),
		Entry("sealed: nine values", func() string {
			return seal(testSecret, []byte{1, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, testQuery)
		}, testQuery),
		Entry("sealed: count larger than the values present", func() string {
			return seal(testSecret, []byte{1, 0, 3, 2, 0}, testQuery)
		}, testQuery),
		Entry("sealed: unterminated value varint", func() string {
			return seal(testSecret, []byte{1, 0, 1, 0x80, 0x80}, testQuery)
		}, testQuery),
		Entry("sealed: non-minimal count", func() string { return seal(testSecret, []byte{1, 0, 0x80, 0x00, 0}, testQuery) }, testQuery),
		Entry("sealed: non-minimal value", func() string { return seal(testSecret, []byte{1, 0, 1, 0x82, 0x00, 0}, testQuery) }, testQuery),
		Entry("sealed: id longer than 64 bytes", func() string {
			return seal(testSecret, append([]byte{1, 0, 0, 65}, strings.Repeat("a", 65)...), testQuery)
		}, testQuery),
		Entry("sealed: id shorter than its length", func() string {
			return seal(testSecret, []byte{1, 0, 0, 5, 'a', 'b'}, testQuery)
		}, testQuery),
		Entry("sealed: trailing garbage after the id", func() string {
			return seal(testSecret, []byte{1, 0, 0, 1, 'a', 'b'}, testQuery)
		}, testQuery),
	)

	It("accepts a payload sealed by hand per the documented format", func() {
		// version 1, backward, 2 values (zigzag 3 → -2, 4 → 2), id "t".
		s := seal(testSecret, []byte{1, 1, 2, 3, 4, 1, 't'}, testQuery)
		Expect(codec.Decode(s, testQuery)).To(Equal(ride.Cursor{Backward: true, Values: []int64{-2, 2}, ID: "t"}))
	})

	It("refuses to encode a cursor that Decode would reject", func() {
		Expect(func() { codec.Encode(ride.Cursor{Values: make([]int64, 9)}, testQuery) }).To(Panic())
		Expect(func() { codec.Encode(ride.Cursor{ID: strings.Repeat("a", 65)}, testQuery) }).To(Panic())
	})

	It("needs a secret", func() {
		Expect(func() { ride.NewCursorCodec(nil) }).To(Panic())
	})

	It("does not depend on the caller keeping the secret unchanged", func() {
		secret := append([]byte(nil), testSecret...)
		c := ride.NewCursorCodec(secret)
		s := c.Encode(ride.Cursor{ID: "trp_a"}, testQuery)
		secret[0] ^= 0xff
		Expect(c.Decode(s, testQuery)).To(Equal(ride.Cursor{ID: "trp_a"}))
	})

	DescribeTable("QueryKey keeps parts apart",
		func(a, b []string) {
			Expect(ride.QueryKey(a...)).NotTo(Equal(ride.QueryKey(b...)))
		},
		Entry("shifted boundary", []string{"ab", "c"}, []string{"a", "bc"}),
		Entry("empty part", []string{"a", ""}, []string{"a"}),
		Entry("separator inside a value", []string{"a:b"}, []string{"a", "b"}),
		Entry("digits that look like a length", []string{"1:a"}, []string{"a"}),
	)

	It("QueryKey is length-prefixed", func() {
		Expect(ride.QueryKey("/v1/trips", "", "-created_at")).To(Equal("9:/v1/trips0:11:-created_at"))
		Expect(ride.QueryKey()).To(Equal(""))
	})
})
