package store

import (
	"cmp"
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"
)

// Every payment writes a payment, a receipt and an event, and every booking and trip move an
// event: their INSERTs are written out here instead of built by GORM from the model on each
// call. GORM's Create reflects over the model, runs its hooks and builds its clauses per
// statement, about 55 allocations and 6 KB each (BenchmarkWriteOverhead). Each model's values
// come from one method beside its column list, and a spec writes every field with a distinct
// value through these statements and reads the row back through GORM, so a column added to a
// model and missed here fails it.

const insertEventSQL = `INSERT INTO events (id, account, type, subject_id, data, created_at)
VALUES (?, ?, ?, ?, ?, ?) RETURNING seq`

func (e *Event) insertValues() []any {
	normalizeTime(&e.CreatedAt)
	return []any{e.ID, e.Account, e.Type, e.SubjectID, e.Data, e.CreatedAt}
}

// insertPaymentSQL leaves a duplicate alone rather than failing (see CreatePayment).
const insertPaymentSQL = `INSERT INTO payments
    (id, trip_id, amount, currency, status, failure_code, payment_method, provider_ref, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`

func (p *Payment) insertValues() []any {
	normalizeTime(&p.CreatedAt)
	return []any{p.ID, p.TripID, p.Amount, p.Currency, p.Status, p.FailureCode, p.PaymentMethod, p.ProviderRef, p.CreatedAt}
}

const insertReceiptSQL = `INSERT INTO receipts (id, trip_id, payment_id, amount, currency, line_items, issued_at)
VALUES (?, ?, ?, ?, ?, ?, ?)`

func (r *Receipt) insertValues() []any {
	normalizeTime(&r.IssuedAt)
	return []any{r.ID, r.TripID, r.PaymentID, r.Amount, r.Currency, r.LineItems, r.IssuedAt}
}

// insertReturning runs an INSERT … RETURNING of one column into dest. Outside a transaction
// GORM runs it as a read (its row callbacks), so it records the caller's position for standby
// reads itself, as the hook on writes does (standbys.register).
func (s *Store) insertReturning(ctx context.Context, query string, values []any, dest any) error {
	if s.txConn != nil {
		return s.readRow(ctx, query, values, dest)
	}
	q := s.rowSQL(ctx, query, values...)
	if err := queryRow(q, dest); err != nil {
		return err
	}
	if s.standbys != nil && fromPool(q) {
		s.standbys.wrote(ctx)
	}
	return nil
}

// readRow runs query, a constant statement returning one row (rowSQL), and scans that row
// into dest; ErrNotFound when it returns none. In a transaction on PostgreSQL the row is read
// through pgx on the transaction's connection (onTxConn), without GORM's processor;
// elsewhere, and for a statement whose text depends on its values, as queryRow reads it.
func (s *Store) readRow(ctx context.Context, query string, vars []any, dest ...any) error {
	if s.txConn != nil {
		if sql, ok := s.sql.of(query, vars); ok {
			return interpretError(s.onTx(ctx, sql, vars, func(conn *pgx.Conn) error {
				return scanOneRow(ctx, conn, sql, vars, dest)
			}))
		}
	}
	return queryRow(s.rowSQL(ctx, query, vars...), dest...)
}

// queryRow runs q, a statement returning one row, and scans that row into dest; ErrNotFound
// when it returns none. A statement refused before it ran (no turn at the pool in time) is
// its error here, where GORM's Row() would return nil to scan.
func queryRow(q *gorm.DB, dest ...any) error {
	rows, err := q.Rows()
	if err != nil {
		return interpretError(err)
	}
	return scanRow(rows, dest...)
}

// scanRow scans the first of rows into dest and closes them; ErrNotFound when there is none.
func scanRow(rows *sql.Rows, dest ...any) error {
	defer rows.Close()
	if !rows.Next() {
		return cmp.Or(interpretError(rows.Err()), ErrNotFound)
	}
	if err := rows.Scan(dest...); err != nil {
		return interpretError(err)
	}
	return interpretError(rows.Close())
}
