package ride

import (
	"fmt"
	"math"
	"math/bits"
)

// Point is a WGS 84 position in decimal degrees, as in the API's location.
type Point struct{ Lat, Lng float64 }

// Rates are a city's prices in minor units of Currency. They live with the
// city (store), not in code, so prices change without a deploy. Rates must be
// non-negative; amounts up to 10^9 minor units are computed exactly.
type Rates struct {
	// Currency is the lowercase ISO 4217 code all amounts are in.
	Currency string
	// BaseFare is charged once per trip.
	BaseFare int64
	// PerKm is charged per kilometre of estimated road distance.
	PerKm int64
	// PerMinute is charged per minute of estimated driving time.
	PerMinute int64
	// MinimumFare is the floor of both the point price and the range's lower bound.
	MinimumFare int64
}

// RideType is the vehicle class a rider asks for; it scales the price.
type RideType string

// The ride types of the contract.
const (
	// RideEconomy is the everyday class, priced at the city's rates.
	RideEconomy RideType = "economy"
	// RideComfort is a newer, roomier car at a 35 % premium.
	RideComfort RideType = "comfort"
	// RideXL seats six at a 75 % premium.
	RideXL RideType = "xl"
)

// AllRideTypes lists every ride type, for enums and exhaustive tests. Do not
// modify it.
var AllRideTypes = []RideType{RideEconomy, RideComfort, RideXL}

// Valid reports whether rt is one of the contract's ride types.
func (rt RideType) Valid() bool { return rt.Multiplier() != 0 }

// Multiplier is the ride type's price factor in basis points (10000 = ×1), an
// integer so that pricing stays exact. It is 0 for an unknown type.
func (rt RideType) Multiplier() int64 {
	switch rt {
	case RideEconomy:
		return 10_000
	case RideComfort:
		return 13_500
	case RideXL:
		return 17_500
	}
	return 0
}

// Pricing constants. They are deliberately simple and public in spirit: a
// rider can reproduce an estimate from the published rates.
const (
	// earthRadiusMeters is the IUGG mean Earth radius; the spherical model is
	// within 0.5 % of the ellipsoid, far below the road factor's uncertainty.
	earthRadiusMeters = 6_371_008.8
	// roadFactor turns great-circle distance into road distance: urban road
	// networks are typically 1.2–1.4 times longer than the straight line.
	roadFactor = 1.3
	// averageSpeedMetersPerHour is 30 km/h, a typical urban average driving
	// speed including stops; the duration estimate derives from it.
	averageSpeedMetersPerHour = 30_000
	// minPricePercentBP and maxPricePercentBP set the quoted range around the
	// point price (90 % and 115 %, in basis points): traffic makes trips
	// longer more often than shorter, so the range leans upwards.
	minPricePercentBP = 9_000
	maxPricePercentBP = 11_500
	// basisPoints is the denominator of multipliers and percentages.
	basisPoints = 10_000
	// metersPerKm and secondsPerMinute convert the integer distance and
	// duration into the units the rates are quoted in.
	metersPerKm      = 1_000
	secondsPerMinute = 60
)

// Quote is a fare estimate: the route the price assumed and the price range
// shown to the rider. Booking charges Max, the upfront price.
type Quote struct {
	// DistanceMeters is the estimated road distance.
	DistanceMeters int64
	// DurationSeconds is the estimated driving time.
	DurationSeconds int64
	// Min and Max bound the price range shown to the rider; Total is the
	// point price they surround. All in minor units of Currency.
	Min, Max, Total int64
	// Currency is copied from the rates.
	Currency string
}

// HaversineMeters is the great-circle distance between a and b on a spherical
// Earth. It is the only geometry the service needs: no routing engine is
// called when quoting, so an estimate is instant and deterministic.
func HaversineMeters(a, b Point) float64 {
	const rad = math.Pi / 180
	dLat := (b.Lat - a.Lat) * rad
	dLng := (b.Lng - a.Lng) * rad
	h := math.Sin(dLat/2)*math.Sin(dLat/2) +
		math.Cos(a.Lat*rad)*math.Cos(b.Lat*rad)*math.Sin(dLng/2)*math.Sin(dLng/2)
	// Rounding can push h a hair past 1 for antipodal points.
	h = min(max(h, 0), 1)
	return 2 * earthRadiusMeters * math.Asin(math.Sqrt(h))
}

// QuoteFare prices a trip from origin to destination: road distance is the
// great-circle distance times roadFactor, rounded to the metre, and then
// QuoteDistance applies. It panics on an unknown ride type, which the API
// rejects before any domain code runs: a 500 is better than a wrong price.
func QuoteFare(origin, destination Point, rt RideType, r Rates) Quote {
	meters := math.Round(HaversineMeters(origin, destination) * roadFactor)
	return QuoteDistance(int64(meters), rt, r)
}

// QuoteDistance prices a trip of a known road distance, so the integer part
// of pricing can be checked by hand and reused if distances ever come from a
// routing service. The rules:
//
//	duration = distance / 30 km/h, rounded half up to the second
//	point    = (base + perKm × km + perMinute × minutes) × multiplier
//	Total    = max(point, minimum)
//	Min      = max(Total × 90 %, minimum)
//	Max      = Total × 115 %
//
// Each amount is rounded half up to the minor unit exactly once, at the end,
// in exact integer arithmetic (no floating point touches money). It panics on
// an unknown ride type, as QuoteFare does.
func QuoteDistance(distanceMeters int64, rt RideType, r Rates) Quote {
	mult := rt.Multiplier()
	if mult == 0 {
		panic(fmt.Sprintf("ride: unknown ride type %q", rt))
	}
	distanceMeters = max(distanceMeters, 0)
	seconds := mulDivHalfUp(distanceMeters, 3600, averageSpeedMetersPerHour)

	// Everything in minor units × metersPerKm × secondsPerMinute, so that
	// per-metre and per-second charges stay whole numbers.
	scaled := r.BaseFare*metersPerKm*secondsPerMinute +
		r.PerKm*distanceMeters*secondsPerMinute +
		r.PerMinute*seconds*metersPerKm
	point := mulDivHalfUp(max(scaled, 0), mult, metersPerKm*secondsPerMinute*basisPoints)

	total := max(point, r.MinimumFare)
	return Quote{
		DistanceMeters:  distanceMeters,
		DurationSeconds: seconds,
		Min:             max(mulDivHalfUp(total, minPricePercentBP, basisPoints), r.MinimumFare),
		Max:             mulDivHalfUp(total, maxPricePercentBP, basisPoints),
		Total:           total,
		Currency:        r.Currency,
	}
}

// mulDivHalfUp returns x × y / d rounded half up, for x, y ≥ 0 and d > 0,
// through a 128-bit intermediate so that large amounts cannot overflow. Adding
// ⌊d/2⌋ before truncating rounds exact halves up for even d; for odd d an
// exact half cannot occur.
func mulDivHalfUp(x, y, d int64) int64 {
	hi, lo := bits.Mul64(uint64(x), uint64(y))
	lo, carry := bits.Add64(lo, uint64(d/2), 0)
	hi += carry
	if hi >= uint64(d) {
		return math.MaxInt64 // quotient would not fit; saturate rather than panic
	}
	q, _ := bits.Div64(hi, lo, uint64(d))
	return int64(min(q, math.MaxInt64))
}

// ServiceArea is a circle in which the service operates (a city): estimates
// and bookings need both ends inside one.
type ServiceArea struct {
	// ID is the city slug, e.g. "san-francisco".
	ID string
	// Center is the middle of the served circle.
	Center Point
	// RadiusMeters is the served circle's great-circle radius.
	RadiusMeters int64
}

// ServiceAreaFor finds the area serving p: of the areas whose circle contains
// p, the one with the nearest center, so overlapping metro areas resolve to
// the city the point is most plausibly in. Ties go to the earlier area. The
// boolean is false when p is outside every area (422 outside_service_area).
func ServiceAreaFor(p Point, areas []ServiceArea) (ServiceArea, bool) {
	best, found, bestDist := ServiceArea{}, false, math.Inf(1)
	for _, a := range areas {
		d := HaversineMeters(p, a.Center)
		if d <= float64(a.RadiusMeters) && d < bestDist {
			best, found, bestDist = a, true, d
		}
	}
	return best, found
}

// Price is amount at the ride type's multiplier, rounded half up: what the type's rates are
// when shown on their own. A quote rounds once, over the whole sum, so it may differ from a
// sum of shown rates by a minor unit.
func (rt RideType) Price(amount int64) int64 {
	return mulDivHalfUp(max(amount, 0), rt.Multiplier(), basisPoints)
}
