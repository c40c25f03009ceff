package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rideapi/ride/store/internal/testdb"
)

// BenchmarkWriteOverhead is what the store adds to the statements every payment and booking
// writes: an event, a payment and a receipt through the store, against the same INSERTs
// through pgx on a connection of their own, each alone and in a transaction; cpu-µs/op is this process's CPU time, what the
// writer spends around the statements (every statement commits, so ns/op is mostly the WAL
// flush). PostgreSQL only:
// TEST_DATABASE_URL=postgres://… go test -run XXX -bench WriteOverhead -benchmem ./store/
func BenchmarkWriteOverhead(b *testing.B) {
	st, url := postgresStore(b, 1)
	ctx := context.Background()
	page, err := st.ListTrips(ctx, TripListParams{Limit: 1})
	if err != nil || len(page.Trips) == 0 {
		b.Fatal("no trip", err)
	}
	trip := page.Trips[0]
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close(ctx) })
	n := 0
	next := func(prefix string) string { n++; return fmt.Sprintf("%s_bench%021d", prefix, n) }
	now := time.Now().UTC()

	// The three writes through the store, then through pgx, each op one transaction of them
	// as a payment writes them: in a transaction the store runs them on its connection
	// through pgx (onTxConn).
	storeWrites := func(st *Store) error {
		if _, err := st.AppendEvent(ctx, Event{ID: next("evt"), Account: trip.Account, Type: "payment.succeeded",
			SubjectID: trip.ID, Data: `{}`, CreatedAt: now}); err != nil {
			return err
		}
		p, err := st.CreatePayment(ctx, Payment{ID: next("pay"), TripID: trip.ID, Amount: 100, Currency: "usd",
			Status: PaymentFailed, PaymentMethod: "pm_card_visa", ProviderRef: "ch_1", CreatedAt: now})
		if err != nil {
			return err
		}
		_, err = st.CreateReceipt(ctx, Receipt{ID: next("rcp"), TripID: trip.ID, PaymentID: p.ID, Amount: 100,
			Currency: "usd", LineItems: `[]`, IssuedAt: now})
		return err
	}
	type execer interface {
		Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	}
	pgxWrites := func(c execer) error {
		var seq int64
		if err := c.QueryRow(ctx, `INSERT INTO events (id, account, type, subject_id, data, created_at)
			VALUES ($1, $2, $3, $4, $5, $6) RETURNING seq`,
			next("evt"), trip.Account, "payment.succeeded", trip.ID, `{}`, now).Scan(&seq); err != nil {
			return err
		}
		pay := next("pay")
		if _, err := c.Exec(ctx, `INSERT INTO payments (id, trip_id, amount, currency, status, failure_code,
			payment_method, provider_ref, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING`,
			pay, trip.ID, 100, "usd", PaymentFailed, nil, "pm_card_visa", "ch_1", now); err != nil {
			return err
		}
		_, err := c.Exec(ctx, `INSERT INTO receipts (id, trip_id, payment_id, amount, currency, line_items, issued_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, next("rcp"), trip.ID, pay, 100, "usd", `[]`, now)
		return err
	}
	for _, bm := range []struct {
		name   string
		writes func() error
	}{
		{"store", func() error { return storeWrites(st) }},
		{"pgx", func() error { return pgxWrites(conn) }},
		{"store_in_transaction", func() error { return st.WithTx(ctx, storeWrites) }},
		{"pgx_in_transaction", func() error {
			return pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.ReadCommitted},
				func(tx pgx.Tx) error { return pgxWrites(tx) })
		}},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b, testdb.ProcessCPU())
			for b.Loop() {
				if err := bm.writes(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// reportCPU reports the process's CPU time per operation since start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64((testdb.ProcessCPU()-start).Microseconds())/float64(b.N), "cpu-µs/op")
}
