package store

import (
	"context"

	"gorm.io/gorm"
)

// What the external specs need to see of the store's insides.

// TripReadStatements is tripReadStatements.
const TripReadStatements = tripReadStatements

// TripReadsWaiting is how many reads of single trips wait for a statement.
func (s *Store) TripReadsWaiting() int {
	s.reads.mu.Lock()
	defer s.reads.mu.Unlock()
	return len(s.reads.waiting)
}

// MigrateTo applies the migrations up to and including version, as a database last migrated by
// an older release would be.
func (s *Store) MigrateTo(ctx context.Context, version int64) error {
	return s.migrateUpTo(ctx, version)
}

// TestDB is the Store's GORM handle (inside WithTx, the transaction), for specs that set up or
// inspect rows the store's methods offer no way to.
func (s *Store) TestDB() *gorm.DB {
	return s.db
}

// TripReadsRunning is how many statements read single trips right now.
func (s *Store) TripReadsRunning() int {
	s.reads.mu.Lock()
	defer s.reads.mu.Unlock()
	return s.reads.running
}

// HoldTripConflict makes every refused insert of an active trip call hold before it looks
// for the trip that refused it.
func HoldTripConflict(hold func()) (restore func()) {
	tripConflictHold = hold
	return func() { tripConflictHold = nil }
}

// HoldSharedReads makes every trip statement that identical reads could share call hold
// after reading its rows, before it ends for the reads waiting for the next one.
func HoldSharedReads(hold func()) (restore func()) {
	shareHold = hold
	return func() { shareHold = nil }
}

// SharedReadsWaiting is how many reads wait for a shared statement to start.
func SharedReadsWaiting() int {
	shares.mu.Lock()
	defer shares.mu.Unlock()
	n := 0
	for _, slot := range shares.under {
		if slot.next != nil {
			n += slot.next.waiting
		}
	}
	return n
}

// StatementSession is what a statement of s starts from (conn).
func (s *Store) StatementSession(ctx context.Context) *gorm.DB {
	return s.conn(ctx)
}

// RecordPositionSQL is the statement of a position report on PostgreSQL, with its arguments in
// this order: driver, lat, lng, heading, speed, at, driver, at, driver.
var RecordPositionSQL = recordPositionSQL.numbered
