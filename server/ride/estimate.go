package ride

import "time"

// EstimateStatus is where a fare estimate stands: bookable, too old, or booked.
type EstimateStatus string

// The statuses of a fare estimate, as the API names them.
const (
	// EstimateValid can be booked.
	EstimateValid EstimateStatus = "valid"
	// EstimateExpired reached its expiry without being booked.
	EstimateExpired EstimateStatus = "expired"
	// EstimateUsed was booked; an estimate is booked at most once.
	EstimateUsed EstimateStatus = "used"
)

// EstimateStatusAt tells an estimate's status at now. Used wins over expired:
// a booked estimate stays "used" forever, which is the more useful answer to a
// client that retries a booking late. An estimate is valid strictly before
// expiresAt.
func EstimateStatusAt(now, expiresAt time.Time, used bool) EstimateStatus {
	switch {
	case used:
		return EstimateUsed
	case !now.Before(expiresAt):
		return EstimateExpired
	}
	return EstimateValid
}

// CheckBookable returns nil for a valid estimate, ErrEstimateAlreadyUsed for
// a booked one and ErrEstimateExpired for an expired one.
func CheckBookable(now, expiresAt time.Time, used bool) error {
	switch EstimateStatusAt(now, expiresAt, used) {
	case EstimateUsed:
		return ErrEstimateAlreadyUsed
	case EstimateExpired:
		return ErrEstimateExpired
	}
	return nil
}

// InServiceArea reports whether p lies within area's circle, for checking
// that a destination is served by the origin's city.
func InServiceArea(p Point, area ServiceArea) bool {
	return HaversineMeters(p, area.Center) <= float64(area.RadiusMeters)
}
