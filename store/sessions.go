package store

import (
	"context"
	"database/sql"

	"gorm.io/gorm"
)

// Statements and transactions: the GORM session each statement starts from, the transactions
// WithTx runs, and the transaction a request's context carries.

// WithTx runs fn inside one database transaction: fn's Store sees and writes only through that
// transaction, which commits when fn returns nil and rolls back when it returns an error or
// panics. Nested calls use savepoints. Errors from the commit are mapped like any other. On
// PostgreSQL the transaction is READ COMMITTED whatever the database's default.
//
// On SQLite the transaction holds the only connection: inside fn, use fn's Store, never s.
func (s *Store) WithTx(ctx context.Context, fn func(tx *Store) error) error {
	if s.turns != nil {
		// The transaction holds its connection, and its turn, until it ends; its statements
		// take none.
		if err := s.turns.enter(ctx); err != nil {
			return interpretError(err)
		}
		defer s.turns.leave()
	}
	var opts []*sql.TxOptions
	if s.engine == EnginePostgres {
		// The writes are written for READ COMMITTED, where each statement sees what committed
		// before it (a payment's paid check after its lock): a database whose default is
		// stricter would fail them with serialization errors instead.
		opts = append(opts, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	}
	db := s.db.WithContext(ctx)
	txConn := s.txConn // a nested transaction's (a savepoint) is its outer one's
	if s.sqlDB != nil {
		// The connection is taken within the bound (poolConn), the transaction run on ctx: a
		// cancellable context would cost each transaction a goroutine of database/sql's, and
		// end it at the bound without the grace its statements get.
		conn, err := poolConn(ctx, s.sqlDB)
		if err != nil {
			return interpretError(err)
		}
		defer conn.Close()
		db.Statement.ConnPool = conn
		if s.engine == EnginePostgres && ctx.Done() == nil {
			// Only a transaction nothing cancels: database/sql rolls one back when its context
			// ends, and a read on the connection itself would then run outside it.
			txConn = conn
		}
	}
	err := db.Transaction(func(tx *gorm.DB) error {
		// A new-statement session of the transaction, which session expects.
		return fn(&Store{db: tx.Session(&gorm.Session{NewDB: true}), engine: s.engine, sql: s.sql, txConn: txConn})
	}, opts...)
	if err == nil && s.standbys != nil {
		s.standbys.wrote(ctx)
	}
	return interpretError(err)
}

// conn is the GORM session every statement starts from: bound to ctx, with fresh statement
// state, on a standby for the reads that may be served by one (see standbys.route). One
// statement per call: the session builds it in place.
func (s *Store) conn(ctx context.Context) *gorm.DB {
	if s.standbys != nil {
		if db := s.standbys.route(ctx); db != nil {
			return session(db, ctx)
		}
	}
	return session(s.db, ctx)
}

// session is db bound to ctx for one statement, which it builds in place: call conn again for
// the next one. db is a new-statement session (a store's root, its transaction's, a
// standby's), so its first chained call, an empty Scopes, makes a statement of its own that
// starts empty and shares db's connection or transaction, and nothing else is copied.
// WithContext copied db's statement, settings and all, for the session and again for the
// statement, and the session copied GORM's configuration, on every query: the largest part
// of the bytes a payment allocated.
func session(db *gorm.DB, ctx context.Context) *gorm.DB {
	tx := db.Scopes()
	tx.Statement.Context = ctx
	return tx
}

type txKey struct{}

// ContextWithTx makes tx, a transaction-scoped Store, the store of everything done with the
// returned context: the request pipeline runs a keyed write inside one transaction, so that
// its recorded answer commits with its effect, or neither does.
func ContextWithTx(ctx context.Context, tx *Store) context.Context {
	return context.WithValue(ctx, txKey{}, tx)
}

// Within is the transaction ctx carries (ContextWithTx), or s when it carries none.
func (s *Store) Within(ctx context.Context) *Store {
	if tx, _ := ctx.Value(txKey{}).(*Store); tx != nil {
		return tx
	}
	return s
}

// InTx tells whether ctx carries a transaction (ContextWithTx).
func InTx(ctx context.Context) bool {
	tx, _ := ctx.Value(txKey{}).(*Store)
	return tx != nil
}
