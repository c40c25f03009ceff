// Package handle carries a Store's GORM handle from package store to the test tooling beside
// it (package storetest), and no further: Go lets only code under store/ import it, so the
// product reaches the database through the store's methods alone.
package handle

import (
	"context"

	"gorm.io/gorm"
)

// DB returns the GORM handle of st, a *store.Store (inside WithTx, the transaction). Package
// store sets it when it initialises; it takes any because this package cannot name the
// store's type without an import cycle.
var DB func(st any) *gorm.DB

// OnDirect makes st, a *store.Store, call fn after each statement it runs without GORM's
// processor (a transaction's prebuilt statements, through pgx), which GORM's callbacks never
// see; fn gets the statement's context, text and values. Like GORM's callbacks, register
// before st is in use. Package store sets it when it initialises.
var OnDirect func(st any, fn func(ctx context.Context, sql string, vars []any))
