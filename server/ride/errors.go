package ride

import (
	"errors"
	"fmt"
)

// ErrInvalidCursor is returned for any cursor the server cannot trust: malformed,
// tampered, from another query or signed with another secret. The API answers
// all of these alike (400 invalid_cursor) so a client learns nothing about why.
var ErrInvalidCursor = errors.New("ride: invalid cursor")

// ErrInvalidTransition marks a status change the trip lifecycle forbids; the API
// maps it to 409 invalid_transition. Errors carrying it are *TransitionError.
var ErrInvalidTransition = errors.New("ride: invalid transition")

// FieldError reports a query or body parameter whose problem the OpenAPI
// document cannot express (a sort key list, a field selection), so the error
// boundary can answer 400 with the same errors[] shape the validator produces.
type FieldError struct {
	// Param names the parameter as the client spelled it, e.g. "sort".
	Param string
	// Value is the offending value or token, echoed so the client can find it.
	Value string
	// Message says what is wrong in words fit for the client.
	Message string
}

// Error formats the problem for logs; clients see Param and Message separately.
func (e *FieldError) Error() string {
	return fmt.Sprintf("ride: invalid %s %q: %s", e.Param, e.Value, e.Message)
}

// TransitionError keeps both ends of a refused status change so the caller can
// explain it ("cannot move a completed trip to arriving") while errors.Is still
// matches ErrInvalidTransition.
type TransitionError struct {
	// From is the trip's current status.
	From TripStatus
	// To is the status that was asked for.
	To TripStatus
}

// Error formats the refused move for logs and problem details.
func (e *TransitionError) Error() string {
	return fmt.Sprintf("ride: invalid transition from %q to %q", e.From, e.To)
}

// Unwrap lets errors.Is(err, ErrInvalidTransition) hold for every TransitionError.
func (e *TransitionError) Unwrap() error { return ErrInvalidTransition }

// Booking errors. Each is a rule of the domain the API answers with its own
// code; errors.Is matches them through any wrapping.
var (
	// ErrOutsideServiceArea means a point of a route lies outside the served
	// area of the origin's city (422 outside_service_area).
	ErrOutsideServiceArea = errors.New("ride: outside the service area")
	// ErrEstimateNotFound means the estimate does not exist or belongs to
	// someone else; the two are answered alike so that ids of other callers'
	// estimates cannot be probed (422 estimate_not_found).
	ErrEstimateNotFound = errors.New("ride: no such estimate")
	// ErrEstimateExpired means the estimate's lifetime has passed
	// (422 estimate_expired).
	ErrEstimateExpired = errors.New("ride: estimate expired")
	// ErrEstimateAlreadyUsed means the estimate was booked already
	// (409 estimate_already_used).
	ErrEstimateAlreadyUsed = errors.New("ride: estimate already used")
	// ErrNoDriverAvailable means no driver of the city is free to take the
	// trip (409 no_driver_available).
	ErrNoDriverAvailable = errors.New("ride: no driver available")
	// ErrRiderHasActiveTrip means the rider already has a trip that is not
	// final; a rider rides one trip at a time (409 rider_has_active_trip).
	ErrRiderHasActiveTrip = errors.New("ride: rider has an active trip")
)
