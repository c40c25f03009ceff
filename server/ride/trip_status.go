package ride

// TripStatus is where a trip stands in its lifecycle. A trip is born accepted
// (booking assigns a driver at once) and ends completed or cancelled.
type TripStatus string

// The statuses of the contract, in lifecycle order.
const (
	// StatusAccepted: a driver is assigned and on the way to the pickup.
	StatusAccepted TripStatus = "accepted"
	// StatusArriving: the driver is about to reach the pickup.
	StatusArriving TripStatus = "arriving"
	// StatusInProgress: the rider is on board.
	StatusInProgress TripStatus = "in_progress"
	// StatusCompleted: the rider was dropped off; final, and the trip can be paid.
	StatusCompleted TripStatus = "completed"
	// StatusCancelled: the trip ended before it started; final.
	StatusCancelled TripStatus = "cancelled"
)

// AllStatuses lists every status in lifecycle order, for filters, enums and
// exhaustive tests. Do not modify it.
var AllStatuses = []TripStatus{StatusAccepted, StatusArriving, StatusInProgress, StatusCompleted, StatusCancelled}

// Event types of the trip lifecycle, as sent in webhooks and /v1/events.
// Consumers subscribe by these names, so they are part of the contract and
// never change within v1.
const (
	// EventTripCreated is emitted by booking, which creates the trip accepted.
	EventTripCreated = "trip.created"
	// EventTripArriving is emitted on entering arriving.
	EventTripArriving = "trip.arriving"
	// EventTripStarted is emitted on entering in_progress; named for what
	// happened rather than for the status.
	EventTripStarted = "trip.started"
	// EventTripCompleted is emitted on entering completed, with the fare.
	EventTripCompleted = "trip.completed"
	// EventTripCancelled is emitted on entering cancelled, by either form.
	EventTripCancelled = "trip.cancelled"
)

// transitions is the lifecycle table of the contract: the statuses each
// status may move to. Final statuses have no entry.
var transitions = map[TripStatus][]TripStatus{
	StatusAccepted:   {StatusArriving, StatusInProgress, StatusCancelled},
	StatusArriving:   {StatusInProgress, StatusCancelled},
	StatusInProgress: {StatusCompleted},
}

// Valid reports whether s is one of the contract's statuses, so that stored
// or client-supplied strings can be checked before they are trusted.
func (s TripStatus) Valid() bool {
	switch s {
	case StatusAccepted, StatusArriving, StatusInProgress, StatusCompleted, StatusCancelled:
		return true
	}
	return false
}

// Final reports whether the trip can no longer change: it frees the driver,
// refuses cancellation and, when completed, allows payment.
func (s TripStatus) Final() bool {
	return s == StatusCompleted || s == StatusCancelled
}

// Active reports whether the trip still occupies its rider and driver, who
// may have only one active trip each.
func (s TripStatus) Active() bool {
	return s.Valid() && !s.Final()
}

// CheckTransition decides a status change before the store applies it. Asking
// for the current status again is a no-op (noop true, no error) because PUT is
// idempotent and must not emit a second event. Any move the lifecycle table
// forbids, or that involves an unknown status, is a *TransitionError wrapping
// ErrInvalidTransition.
func CheckTransition(from, to TripStatus) (noop bool, err error) {
	if !from.Valid() || !to.Valid() {
		return false, &TransitionError{From: from, To: to}
	}
	if from == to {
		return true, nil
	}
	for _, next := range transitions[from] {
		if next == to {
			return false, nil
		}
	}
	return false, &TransitionError{From: from, To: to}
}

// EventType names the event a trip emits when it enters status to, so the
// outbox row and webhook header agree everywhere. It returns "" for accepted,
// which is entered only by booking (trip.created), and for unknown statuses.
func EventType(to TripStatus) string {
	switch to {
	case StatusArriving:
		return EventTripArriving
	case StatusInProgress:
		return EventTripStarted
	case StatusCompleted:
		return EventTripCompleted
	case StatusCancelled:
		return EventTripCancelled
	}
	return ""
}
