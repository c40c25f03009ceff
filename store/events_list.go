package store

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// EventByID returns one of the account's events, or ErrNotFound (another account's included).
func (s *Store) EventByID(ctx context.Context, account, id string) (Event, error) {
	var e Event
	if err := s.conn(ctx).Where("id = ? AND account = ?", id, account).Take(&e).Error; err != nil {
		return Event{}, interpretError(err)
	}
	return e, nil
}

// EventFilter narrows an event list to one account's events; empty and nil filter nothing
// else, time bounds are exclusive.
type EventFilter struct {
	Account string
	Type    string
	// TripID keeps the events whose subject is the trip: its trip.* and payment.* events.
	TripID        string
	CreatedAfter  *time.Time
	CreatedBefore *time.Time
}

// ListEvents returns one page of events, newest first (created_at, then id, descending), or
// oldest first (p.OldestFirst).
func (s *Store) ListEvents(ctx context.Context, f EventFilter, p PageParams) (Page[Event], error) {
	base := func() *gorm.DB {
		q := s.model(ctx, &Event{}).Where("events.account = ?", f.Account)
		if f.Type != "" {
			q = q.Where("events.type = ?", f.Type)
		}
		if f.TripID != "" {
			q = q.Where("events.subject_id = ?", f.TripID)
		}
		if f.CreatedAfter != nil {
			q = q.Where("events.created_at > ?", floorMicro(*f.CreatedAfter))
		}
		if f.CreatedBefore != nil {
			q = q.Where("events.created_at < ?", ceilMicro(*f.CreatedBefore))
		}
		return q
	}
	return byTime[Event](base, "events.created_at", "events.id", p)
}

// Keyset is the event's position in a list ordered by its time, for cursors.
func (e Event) Keyset() Keyset { return timeKeyset(e.CreatedAt, e.ID) }
