package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Event is a row of the outbox: a change consumers may hear about, written in the same
// transaction as the change. Data is the event's JSON payload as published.
type Event struct {
	Seq       int64  `gorm:"column:seq;primaryKey;autoIncrement"`
	ID        string `gorm:"column:id"` // evt_…
	Account   string // the account of the trip the event is about
	Type      string
	SubjectID string // the trip or payment the event is about, for lookups
	Data      string // JSON
	CreatedAt time.Time
}

// TableName pins the table name so that GORM's naming rules can never move it.
func (Event) TableName() string { return "events" }

// BeforeSave keeps stored times in UTC at microsecond precision.
func (e *Event) BeforeSave(*gorm.DB) error {
	normalizeTime(&e.CreatedAt)
	return nil
}

// AfterFind returns times in UTC whatever the driver's location.
func (e *Event) AfterFind(*gorm.DB) error {
	normalizeTime(&e.CreatedAt)
	return nil
}

// AppendEvent writes an event. Call it on the transaction's Store that makes the change, so
// the event commits or rolls back with it.
func (s *Store) AppendEvent(ctx context.Context, e Event) (Event, error) {
	if e.ID == "" || e.Type == "" || e.SubjectID == "" || e.Account == "" {
		return Event{}, fmt.Errorf("store: an event needs an id, an account, a type and a subject")
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = s.db.NowFunc()
	}
	if err := s.insertReturning(ctx, insertEventSQL, e.insertValues(), &e.Seq); err != nil {
		return Event{}, err
	}
	return e, nil
}

// EventsBySubject lists the events about one trip or payment in the order they were written.
func (s *Store) EventsBySubject(ctx context.Context, subjectID string) ([]Event, error) {
	var events []Event
	err := s.conn(ctx).Where("subject_id = ?", subjectID).Order("seq").Find(&events).Error
	return events, interpretError(err)
}
