package delivery

import (
	"context"
	"time"

	"github.com/rideapi/ride/webhooks"
)

// Store is what the Worker needs from the database; the server's store implements it. Every
// method must be safe for concurrent use by several workers, in one process or in several
// replicas sharing the database.
//
// The Store makes the deliveries: each event written gets, in the same transaction, a pending
// delivery due at once for every endpoint that subscribes to its kind, so that a delivery
// exists exactly when its event committed; those of a disabled endpoint are held until it is
// enabled again.
type Store interface {
	// ClaimDeliveries takes up to p.Limit pending deliveries due at p.Now for enabled endpoints,
	// numbers each claim's attempt (one more than the last) and leases it until p.LeaseUntil:
	// until then no other claim returns it, and afterwards another may, as the next attempt.
	// Concurrent claims never return the same attempt twice. An earlier attempt that was
	// claimed but never recorded (its worker died) is logged as lost, named p.NewAttemptID().
	ClaimDeliveries(ctx context.Context, p ClaimParams) ([]Delivery, error)
	// RecordAttempt logs an attempt and moves its delivery on (done, failed, or due again at
	// NextAttemptAt), unless the delivery was claimed again meanwhile; with DisableEndpoint it
	// also disables the endpoint and fails its other pending deliveries. A delivery deleted
	// with its endpoint is not an error.
	RecordAttempt(ctx context.Context, a Attempt) error
	// PurgeEvents deletes the events created before a time, with their deliveries and
	// attempts, and reports how many events it deleted.
	PurgeEvents(ctx context.Context, createdBefore time.Time) (int64, error)
}

// EventListener is a Store that can say when new deliveries commit (PostgreSQL
// LISTEN/NOTIFY). The worker then wakes at once instead of at its next poll. ListenEvents
// calls notify after each commit that made deliveries due until ctx ends, reconnecting by
// itself; it returns only when ctx ends or listening is not possible (then polling alone
// carries on).
type EventListener interface {
	ListenEvents(ctx context.Context, notify func()) error
}

// BatchRecorder is a Store that records several attempts in one round trip. The worker then
// records the attempts that end while a record is being written together, in the next one:
// one write for many attempts when the worker is busy, no wait when it is not.
type BatchRecorder interface {
	// RecordAttempts records attempts as RecordAttempt does each, all or none: when it fails,
	// the worker records each one alone, so that only the attempt at fault fails. No attempt
	// in a batch disables its endpoint.
	RecordAttempts(ctx context.Context, attempts []Attempt) error
}

// ClaimParams ask ClaimDeliveries for due deliveries.
type ClaimParams struct {
	Now        time.Time
	LeaseUntil time.Time
	Limit      int
	// NewAttemptID names the log entry of an attempt whose worker died before recording it,
	// which the claim of the next attempt writes (see Store).
	NewAttemptID func() string
}

// Delivery is one claimed attempt: which event goes to which URL, signed with which secrets.
type Delivery struct {
	// ID is the delivery's row id.
	ID int64
	// Attempt is this attempt's 1-based number.
	Attempt    int
	Event      webhooks.Event
	EndpointID string
	URL        string
	// Secret is the endpoint's current secret. PreviousSecret, when not empty, also signs
	// until PreviousSecretExpiresAt (the grace window of a rotation).
	Secret                  string
	PreviousSecret          string
	PreviousSecretExpiresAt time.Time
}

// Attempt is the record of one attempt, for RecordAttempt and the deliveries log.
type Attempt struct {
	ID         string
	DeliveryID int64
	EndpointID string
	EventID    string
	EventType  string
	// Number is the attempt's 1-based number, as claimed.
	Number  int
	Outcome Outcome
	// ResponseStatus is the receiver's HTTP status; 0 when it gave none (connection error,
	// timeout, refused address).
	ResponseStatus int
	Latency        time.Duration
	// Error says why the attempt failed; empty on success.
	Error       string
	AttemptedAt time.Time
	// NextAttemptAt is when the next attempt is due; zero unless Outcome is Pending.
	NextAttemptAt   time.Time
	DisableEndpoint bool
}
