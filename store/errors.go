package store

import (
	"database/sql"
	"errors"
	"fmt"

	"gorm.io/gorm"
)

// The store's sentinels. Every method returns errors that match one of these with errors.Is
// when the condition is one a caller can act on; anything else is an internal failure.
var (
	// ErrNotFound means the row asked for does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrDuplicate means a row with the same primary key or unique value already exists.
	ErrDuplicate = errors.New("store: duplicate")
	// ErrConflict means a conditional change found the row in another state than it required,
	// so nothing was changed (for example a trip that moved on concurrently).
	ErrConflict = errors.New("store: conflict")
	// ErrInvalidReference means the row refers to another row that does not exist (a foreign key).
	ErrInvalidReference = errors.New("store: reference to a missing row")
	// ErrRiderHasActiveTrip means an active trip could not be stored because its rider already
	// has one (the partial unique index on trips). It wraps ErrDuplicate.
	ErrRiderHasActiveTrip = errors.New("store: the rider already has an active trip")
	// ErrDriverHasActiveTrip means an active trip could not be stored because its driver already
	// has one (the partial unique index on trips). It wraps ErrDuplicate.
	ErrDriverHasActiveTrip = errors.New("store: the driver already has an active trip")
	// ErrLimitReached means a row could not be added because its owner holds as many as it
	// may (an account's active API keys).
	ErrLimitReached = errors.New("store: limit reached")
)

// SQLSTATE and SQLite extended result codes for the violations the store reports. They are
// matched through small interfaces so that this file needs neither driver's error type.
const (
	pgUniqueViolation     = "23505"
	pgForeignKeyViolation = "23503"

	sqliteConstraintForeignKey = 787  // SQLITE_CONSTRAINT_FOREIGNKEY
	sqliteConstraintPrimaryKey = 1555 // SQLITE_CONSTRAINT_PRIMARYKEY
	sqliteConstraintUnique     = 2067 // SQLITE_CONSTRAINT_UNIQUE
)

// interpretError is the one place where GORM's and the engines' errors become the store's
// sentinels. The original error stays wrapped so logs keep the engine's detail. Errors that
// already carry a store sentinel, and nil, pass through unchanged.
func interpretError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrDuplicate),
		errors.Is(err, ErrConflict), errors.Is(err, ErrInvalidReference), errors.Is(err, ErrLimitReached):
		return err
	case errors.Is(err, gorm.ErrRecordNotFound), errors.Is(err, sql.ErrNoRows):
		return ErrNotFound
	case errors.Is(err, gorm.ErrDuplicatedKey):
		return fmt.Errorf("%w: %w", ErrDuplicate, err)
	case errors.Is(err, gorm.ErrForeignKeyViolated):
		return fmt.Errorf("%w: %w", ErrInvalidReference, err)
	}

	// Errors that did not pass through GORM's translator (raw rows, commits, a transaction's
	// statements through pgx).
	var pg interface{ SQLState() string }
	if errors.As(err, &pg) {
		switch pg.SQLState() {
		case pgUniqueViolation:
			return fmt.Errorf("%w: %w", ErrDuplicate, err)
		case pgForeignKeyViolation:
			return fmt.Errorf("%w: %w", ErrInvalidReference, err)
		}
	}
	var lite interface{ Code() int }
	if errors.As(err, &lite) {
		switch lite.Code() {
		case sqliteConstraintUnique, sqliteConstraintPrimaryKey:
			return fmt.Errorf("%w: %w", ErrDuplicate, err)
		case sqliteConstraintForeignKey:
			return fmt.Errorf("%w: %w", ErrInvalidReference, err)
		}
	}
	return err
}

// changedRows is the outcome of a write that must change at least one row: the write's own
// error, interpreted, or none when no row matched its conditions.
func changedRows(res execResult, none error) error {
	if res.err != nil {
		return interpretError(res.err)
	}
	if res.rows == 0 {
		return none
	}
	return nil
}

// resultOf is what a GORM statement did, as changedRows reads it.
func resultOf(res *gorm.DB) execResult { return execResult{rows: res.RowsAffected, err: res.Error} }
