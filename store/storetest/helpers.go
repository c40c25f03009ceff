package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/store/internal/handle"
)

// The helpers below set up and inspect rows that the store's methods offer no way to. They go
// around the store's methods, never around its models: a row read here is the whole model, and
// times written here are normalised like the models' own.

// Statement is one SQL statement as the store sent it to the database.
type Statement struct {
	// Context is the context the statement ran with; nil when it had none.
	Context context.Context
	// Table is the statement's main table, when GORM knows it.
	Table string
	// SQL is the text with its placeholders; empty when GORM built none.
	SQL string
	// Vars are the placeholders' values, a copy the callback may keep.
	Vars []any
	// InTx tells whether the statement ran inside a transaction.
	InTx bool
	// DryRun marks a statement GORM only built, to embed it in another (a subquery), and
	// never sent on its own.
	DryRun bool
}

func statementOf(db *gorm.DB) Statement {
	_, inTx := db.Statement.ConnPool.(*sql.Tx)
	return Statement{
		Context: db.Statement.Context,
		Table:   db.Statement.Table,
		SQL:     db.Statement.SQL.String(),
		Vars:    slices.Clone(db.Statement.Vars),
		InTx:    inTx,
		DryRun:  db.DryRun,
	}
}

// directStatement is a statement the store ran without GORM's processor: a transaction's,
// on its connection (handle.OnDirect).
func directStatement(ctx context.Context, sql string, vars []any) Statement {
	return Statement{Context: ctx, SQL: sql, Vars: slices.Clone(vars), InTx: true}
}

// OnReads calls fn after each read st runs: every statement of GORM's query callbacks (Find,
// First, Take, Count) and row callbacks (Row, Rows, Scan, which the store's hot trip reads use)
// that only reads, and a transaction's prebuilt reads, which run without GORM's processor. A
// row callback also runs writes that return rows (INSERT … RETURNING, a claim's WITH …
// INSERT): those are left out, by their text (IsRead). name identifies the registration, once
// per st. GORM's callbacks may not change while statements run: register before st is in use.
func OnReads(st *store.Store, name string, fn func(Statement)) error {
	record := func(db *gorm.DB) {
		if s := statementOf(db); IsRead(s.SQL) {
			fn(s)
		}
	}
	handle.OnDirect(st, func(ctx context.Context, sql string, vars []any) {
		if IsRead(sql) {
			fn(directStatement(ctx, sql, vars))
		}
	})
	cb := handle.DB(st).Callback()
	if err := cb.Query().After("gorm:query").Register(name, record); err != nil {
		return err
	}
	return cb.Row().After("gorm:row").Register(name, record)
}

// OnStatements calls fn after each statement st runs, whatever its kind: creates, queries,
// updates, deletes, row reads and raw statements, through GORM's processor or not. name
// identifies the registration, once per st. GORM's callbacks may not change while statements
// run: register before st is in use.
func OnStatements(st *store.Store, name string, fn func(Statement)) error {
	handle.OnDirect(st, func(ctx context.Context, sql string, vars []any) { fn(directStatement(ctx, sql, vars)) })
	record := func(db *gorm.DB) { fn(statementOf(db)) }
	cb := handle.DB(st).Callback()
	for _, err := range []error{
		cb.Create().Register(name, record),
		cb.Query().Register(name, record),
		cb.Update().Register(name, record),
		cb.Delete().Register(name, record),
		cb.Row().Register(name, record),
		cb.Raw().Register(name, record),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// TripRow reads the whole stored row of one trip, the internal route, dispatch and cost
// columns included, which the store's trip reads leave zero. Its driver summary stays zero.
func TripRow(ctx context.Context, st *store.Store, id string) (store.Trip, error) {
	var t store.Trip
	err := handle.DB(st).WithContext(ctx).First(&t, "id = ?", id).Error
	return t, err
}

// TripRows reads up to n whole trip rows, in no particular order, as TripRow reads one.
func TripRows(ctx context.Context, st *store.Store, n int) ([]store.Trip, error) {
	var trips []store.Trip
	err := handle.DB(st).WithContext(ctx).Limit(n).Find(&trips).Error
	return trips, err
}

// Drivers reads every driver's whole row, in no particular order.
func Drivers(ctx context.Context, st *store.Store) ([]store.Driver, error) {
	var drivers []store.Driver
	err := handle.DB(st).WithContext(ctx).Find(&drivers).Error
	return drivers, err
}

// DeleteTrip deletes one trip's row, as if it had never been booked. Deleting a trip that
// does not exist is no error.
func DeleteTrip(ctx context.Context, st *store.Store, id string) error {
	return handle.DB(st).WithContext(ctx).Delete(&store.Trip{}, "id = ?", id).Error
}

// SetTripETA sets one trip's ETA in minutes (and its updated_at, as any update of the model
// does), which only dispatch sets otherwise.
func SetTripETA(ctx context.Context, st *store.Store, id string, minutes int) error {
	return handle.DB(st).WithContext(ctx).Model(&store.Trip{}).Where("id = ?", id).
		Update("eta_minutes", minutes).Error
}

// SetIdempotencyRecordPending makes the account's record of key look like an attempt still in
// flight, or one whose process died mid-request: pending, held by owner since lockedAt.
func SetIdempotencyRecordPending(ctx context.Context, st *store.Store, account, key, owner string, lockedAt time.Time) error {
	return handle.DB(st).WithContext(ctx).Model(&store.IdempotencyRecord{}).
		Where("account = ? AND idem_key = ?", account, key).
		Updates(map[string]any{
			"status":    store.IdempotencyPending,
			"owner":     owner,
			"locked_at": lockedAt.UTC().Truncate(time.Microsecond),
		}).Error
}

// CountRows counts the rows of model's table (model is a pointer to a store model, such as
// &store.Trip{}) that match where, an SQL condition with ? placeholders for args. An empty
// where counts every row.
func CountRows(ctx context.Context, st *store.Store, model any, where string, args ...any) (int64, error) {
	q := handle.DB(st).WithContext(ctx).Model(model)
	if where != "" {
		q = q.Where(where, args...)
	}
	var n int64
	err := q.Count(&n).Error
	return n, err
}

// DriversWithSeveralActiveTrips returns the drivers that hold more than one active trip at
// once, which the database's rules forbid.
func DriversWithSeveralActiveTrips(ctx context.Context, st *store.Store) ([]string, error) {
	return withSeveralActiveTrips(ctx, st, "driver_id")
}

// RidersWithSeveralActiveTrips returns the riders that have more than one active trip at
// once, which the database's rules forbid.
func RidersWithSeveralActiveTrips(ctx context.Context, st *store.Store) ([]string, error) {
	return withSeveralActiveTrips(ctx, st, "rider_id")
}

func withSeveralActiveTrips(ctx context.Context, st *store.Store, column string) ([]string, error) {
	var owners []string
	err := handle.DB(st).WithContext(ctx).Model(&store.Trip{}).
		Where("status IN ?", store.ActiveTripStatuses).
		Group(column).Having("COUNT(*) > 1").Pluck(column, &owners).Error
	return owners, err
}

// AgeDriverPosition moves the driver's latest position back in time by age, as if their app
// had stopped reporting that long ago.
func AgeDriverPosition(ctx context.Context, st *store.Store, driverID string, age time.Duration) error {
	at := time.Now().Add(-age).UTC().Truncate(time.Microsecond)
	return handle.DB(st).WithContext(ctx).Table("drivers").Where("id = ?", driverID).
		UpdateColumn("position_at", at).Error
}

// CreateAPIKeys adds n admin keys to the account in one statement, as if its admins had made
// them one by one: for specs that need an account near its limit of keys. Their secrets are
// unknown, so they never authenticate.
func CreateAPIKeys(ctx context.Context, st *store.Store, account string, n int) error {
	keys := make([]store.APIKey, n)
	now := time.Now().UTC().Truncate(time.Microsecond)
	for i := range keys {
		var raw [32]byte
		_, _ = rand.Read(raw[:])
		keys[i] = store.APIKey{ID: "key_" + hex.EncodeToString(raw[:8]), Hash: hex.EncodeToString(raw[:]),
			Role: store.RoleAdmin, Account: account, CreatedAt: now}
	}
	return handle.DB(st).WithContext(ctx).CreateInBatches(keys, 500).Error
}

// SetDriverName renames a driver, as no API does.
func SetDriverName(ctx context.Context, st *store.Store, id, name string) error {
	return handle.DB(st).WithContext(ctx).Model(&store.Driver{}).Where("id = ?", id).Update("name", name).Error
}

// IsRead tells whether a statement's text only reads: a SELECT, or a WITH query none of whose
// parts writes. Text GORM never built (a dry run's empty SQL) counts as a read, as GORM's
// query callbacks see it.
func IsRead(sql string) bool {
	words := strings.Fields(strings.ToUpper(sql))
	if len(words) == 0 {
		return true
	}
	switch words[0] {
	case "SELECT", "(SELECT":
		return true
	case "WITH":
		for _, w := range words {
			switch strings.TrimLeft(w, "(") {
			case "INSERT", "UPDATE", "DELETE", "MERGE":
				return false
			}
		}
		return true
	}
	return false
}
