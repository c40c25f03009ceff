//go:build race

package store_test

// raceEnabled: the race detector slows pure-Go SQLite about tenfold, so timing budgets do not
// apply.
const raceEnabled = true
