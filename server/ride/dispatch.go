package ride

import (
	"math"
	"strings"
	"time"
)

// Dispatch constants: how a booked trip's internal figures are derived. Like
// the pricing constants they are deliberately simple; a routing or payroll
// service could replace them without changing any caller.
const (
	// driverPayoutBP is the driver's share of the fare: 75 %.
	driverPayoutBP = 7_500
	// processingFeeBP and processingFeeFixed are the payment processor's fee
	// on a charge (2.9 % + 30 minor units), the platform's cost of a trip.
	processingFeeBP    = 290
	processingFeeFixed = 30
	// polylinePrecision is the scale of Google's encoded polyline format
	// (five decimal places), which routing services return and the store
	// keeps as the trip's route.
	polylinePrecision = 1e5
)

// PickupETA is how long a driver at from needs to reach the pickup at to: the
// road distance (great-circle distance × roadFactor) at the urban average
// speed, rounded up to whole minutes and at least one minute, because a
// rider is never told "0 minutes" and a promise should err on the late side.
func PickupETA(from, to Point) time.Duration {
	meters := HaversineMeters(from, to) * roadFactor
	minutes := math.Ceil(meters / averageSpeedMetersPerHour * 60)
	return time.Duration(max(minutes, 1)) * time.Minute
}

// DriverPayout is what the driver earns for a trip of the given fare: 75 %,
// rounded half up to the minor unit. It is cost basis, never shown.
func DriverPayout(fare int64) int64 {
	return mulDivHalfUp(max(fare, 0), driverPayoutBP, basisPoints)
}

// PlatformCost is what charging the fare costs the platform (the payment
// processor's 2.9 % + 30), rounded half up. It is cost basis, never shown.
func PlatformCost(fare int64) int64 {
	return mulDivHalfUp(max(fare, 0), processingFeeBP, basisPoints) + processingFeeFixed
}

// MatchingScore rates how good a match a driver was for a booking, in (0, 1]:
// mostly proximity (1 at the pickup, ½ at 2 km, falling with distance), partly
// the driver's rating out of 5. Dispatch analysis reads it; riders never see it.
// It is rounded to four decimals so that both engines store the same value.
func MatchingScore(pickupMeters float64, rating float64) float64 {
	proximity := 1 / (1 + max(pickupMeters, 0)/2_000)
	quality := min(max(rating, 0), 5) / 5
	score := 0.8*proximity + 0.2*quality
	return math.Round(score*10_000) / 10_000
}

// EncodePolyline writes points in Google's encoded polyline format (precision
// 5): the compact route representation routing services exchange.
func EncodePolyline(points []Point) string {
	var b strings.Builder
	var prevLat, prevLng int64
	for _, p := range points {
		lat := int64(math.Round(p.Lat * polylinePrecision))
		lng := int64(math.Round(p.Lng * polylinePrecision))
		writePolylineValue(&b, lat-prevLat)
		writePolylineValue(&b, lng-prevLng)
		prevLat, prevLng = lat, lng
	}
	return b.String()
}

// writePolylineValue appends one signed delta: zig-zag encoded, then in 5-bit
// chunks, low first, each offset by 63 and all but the last flagged with 0x20.
func writePolylineValue(b *strings.Builder, v int64) {
	u := uint64(v) << 1
	if v < 0 {
		u = ^u
	}
	for u >= 0x20 {
		b.WriteByte(byte(0x20|(u&0x1f)) + 63)
		u >>= 5
	}
	b.WriteByte(byte(u) + 63)
}

// PositionFreshness is how old a driver's latest position may be for matching: an app that
// stopped reporting for longer has most likely lost its driver or its signal.
const PositionFreshness = 2 * time.Minute

// LiveETA is a trip's minutes until pickup, or nil when there is none to tell. Only while the
// driver is on the way (accepted, arriving): from driverAt, the driver's position reported
// since booking, with PickupETA's road model; without one, booked, the estimate made at
// booking. After pickup and on final trips there is no ETA.
func LiveETA(status TripStatus, booked *int, pickup Point, driverAt *Point) *int {
	if status != StatusAccepted && status != StatusArriving {
		return nil
	}
	if driverAt == nil {
		return booked
	}
	minutes := int(PickupETA(*driverAt, pickup) / time.Minute)
	return &minutes
}
