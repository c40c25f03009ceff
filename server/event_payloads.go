package server

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// tripStatusData is the payload of every trip.* event but trip.completed.
type tripStatusData struct {
	TripID     string    `json:"trip_id"`
	Status     string    `json:"status"`
	OccurredAt time.Time `json:"occurred_at"`
}

// tripCompletedData is the payload of trip.completed, as the contract names it.
type tripCompletedData struct {
	TripID      string    `json:"trip_id"`
	Fare        gen.Money `json:"fare"`
	CompletedAt time.Time `json:"completed_at"`
}

// appendTripEvent writes the event of the status trip has just entered, on tx, and publishes
// the trip's live update: both commit or roll back with the change. Entering accepted is
// booking (trip.created).
func appendTripEvent(ctx context.Context, tx *store.Store, trip store.Trip, at time.Time) error {
	status := ride.TripStatus(trip.Status)
	eventType := ride.EventType(status)
	var data any = tripStatusData{TripID: trip.ID, Status: trip.Status, OccurredAt: at.UTC()}
	switch {
	case status == ride.StatusAccepted:
		eventType = ride.EventTripCreated
	case status == ride.StatusCompleted && trip.CompletedAt != nil:
		data = tripCompletedData{
			TripID:      trip.ID,
			Fare:        gen.Money{Total: trip.FareTotal, Currency: trip.FareCurrency},
			CompletedAt: trip.CompletedAt.UTC(),
		}
	}
	if eventType == "" {
		return fmt.Errorf("no event for trip status %q", trip.Status)
	}
	payload, err := json.Marshal(data)
	if err != nil {
		return err
	}
	if _, err = tx.AppendEvent(ctx, store.Event{
		ID: ride.NewID(ride.PrefixEvent), Account: trip.Account, Type: eventType, SubjectID: trip.ID,
		Data: string(payload), CreatedAt: at,
	}); err != nil {
		return err
	}
	return publishTripUpdate(ctx, tx, &trip, at)
}
