// Package handle carries a Store's GORM handle from package store to the test tooling beside
// it (package storetest), and no further: Go lets only code under store/ import it, so the
// product reaches the database through the store's methods alone.
package handle

import "gorm.io/gorm"

// DB returns the GORM handle of st, a *store.Store (inside WithTx, the transaction). Package
// store sets it when it initialises; it takes any because this package cannot name the
// store's type without an import cycle.
var DB func(st any) *gorm.DB
