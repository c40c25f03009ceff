package ride_test

import (
	"testing"

	"github.com/rideapi/ride/server/ride"
)

// A typical trips page edge: created_at in microseconds, fare, id.
var benchCursor = ride.Cursor{Values: []int64{1_763_700_000_123_456, 1850}, ID: "trp_abcdefghijklmnopqrstuvwxyz"}

func BenchmarkCursorEncode(b *testing.B) {
	codec := ride.NewCursorCodec(testSecret)
	b.ReportAllocs()
	for b.Loop() {
		codec.Encode(benchCursor, testQuery)
	}
}

func BenchmarkCursorDecode(b *testing.B) {
	codec := ride.NewCursorCodec(testSecret)
	s := codec.Encode(benchCursor, testQuery)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := codec.Decode(s, testQuery); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCursorDecodeTampered(b *testing.B) {
	codec := ride.NewCursorCodec(testSecret)
	s := codec.Encode(benchCursor, testQuery)
	other := testQuery + "&city=paris"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := codec.Decode(s, other); err == nil {
			b.Fatal("accepted")
		}
	}
}

func BenchmarkQuoteFare(b *testing.B) {
	rates := ride.Rates{Currency: "usd", BaseFare: 250, PerKm: 120, PerMinute: 30, MinimumFare: 700}
	from := ride.Point{Lat: 37.7749, Lng: -122.4194}
	to := ride.Point{Lat: 37.8044, Lng: -122.2712}
	b.ReportAllocs()
	for b.Loop() {
		ride.QuoteFare(from, to, ride.RideComfort, rates)
	}
}

func BenchmarkNewID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		ride.NewID(ride.PrefixTrip)
	}
}
