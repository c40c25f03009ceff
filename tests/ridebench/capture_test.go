package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSubstitutionSwapsTheSampleValuesAndShiftsItsTimes(t *testing.T) {
	at := time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)
	sub := &substitution{
		strs:   []string{"bench-07", "bench-23", "rdr_a", "rdr_b"},
		ints:   map[int64]int64{1200: 1500},
		floats: map[float64]float64{-33.1: -17.2},
		shift:  time.Minute,
	}
	later := at.Add(time.Hour)
	got := sub.apply([]any{"bench-07", `{"rider_id":"rdr_a","city":"bench-07"}`, int64(1200), int64(7), -33.1, 4.5, at, &later, (*time.Time)(nil)})
	want := []any{"bench-23", `{"rider_id":"rdr_b","city":"bench-23"}`, int64(1500), int64(7), -17.2, 4.5, at.Add(time.Minute)}
	if !slices.Equal(got[:7], want) {
		t.Errorf("apply = %v, want %v", got[:7], want)
	}
	if p := got[7].(*time.Time); !p.Equal(later.Add(time.Minute)) {
		t.Errorf("a *time.Time became %v, want %v", p, later.Add(time.Minute))
	}
	if p := got[8].(*time.Time); p != nil {
		t.Errorf("a nil *time.Time became %v", p)
	}
	// A value bound during the replay applies to the statements after it.
	sub.set("drv_sample", "drv_claimed")
	if got := sub.apply([]any{"drv_sample"}); got[0] != "drv_claimed" {
		t.Errorf("after set: %v", got)
	}
}

func TestClaimReadIsTheLastReadOfDriversBeforeTheDriverIsWritten(t *testing.T) {
	stmts := []statement{
		{sql: `SELECT * FROM "cities" ORDER BY id`},
		{sql: `SELECT * FROM "riders" WHERE id = $1`, vars: []any{"rdr_a"}},
		{sql: `SELECT * FROM "drivers" WHERE city = $1 FOR UPDATE SKIP LOCKED`, vars: []any{"bench-07"}},
		{sql: `UPDATE "drivers" SET "available"=$1 WHERE id = $2 AND available`, vars: []any{false, "drv_x"}},
		{sql: `SELECT * FROM "drivers" WHERE id = $1`, vars: []any{"drv_x"}},
	}
	if i, err := claimRead(stmts, "drv_x"); err != nil || i != 2 {
		t.Errorf("claimRead = %d, %v; want 2", i, err)
	}
	if _, err := claimRead(stmts[3:], "drv_x"); err == nil {
		t.Error("claimRead found a read of drivers where there is none before the write")
	}
}

func TestWritesNamesATableNoCapturedStatementWrites(t *testing.T) {
	stmts := []statement{
		{sql: "WITH async AS (SELECT 1)\nINSERT INTO idempotency_records\n    (account) SELECT $1 FROM async"},
		{sql: `SELECT trips.id FROM trips WHERE trips.id = $1 FOR UPDATE OF trips`},
		{sql: `INSERT INTO "payments" ("id") VALUES ($1)`},
		{sql: "UPDATE idempotency_records\nSET status = $1"},
	}
	if err := writes(stmts, "idempotency_records", "payments"); err != nil {
		t.Errorf("writes: %v", err)
	}
	if err := writes(stmts[3:], "idempotency_records"); err != nil {
		t.Errorf("an UPDATE across lines: %v", err)
	}
	err := writes(stmts, "payments", "trips", "receipts")
	if err == nil || !strings.Contains(err.Error(), "no trips") {
		t.Errorf("writes named %v, want the trips a SELECT … FOR UPDATE only reads", err)
	}
}
