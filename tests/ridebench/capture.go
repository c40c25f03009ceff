package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rideapi/ride/server"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/store/storetest"
)

// statement is one SQL statement as GORM sent it to the database: the text with its
// placeholders, the values, and whether it ran inside a transaction.
type statement struct {
	sql  string
	vars []any
	inTx bool
}

// recorder captures the statements of requests marked with captureKey. It is how the
// reference learns what the server really runs: the benchmark serves one sample request per
// scenario through the server's own code, in this process, on a store whose GORM callbacks
// record every statement.
type recorder struct {
	mu    sync.Mutex
	stmts []statement
}

type captureKey struct{}

func (r *recorder) install(st *store.Store) error {
	return storetest.OnStatements(st, "ridebench:record", func(stmt storetest.Statement) {
		// DryRun: GORM building a subquery (the page's EXISTS probe) runs the query callbacks
		// without executing anything; the subquery travels inside its outer statement.
		if stmt.Context == nil || stmt.Context.Value(captureKey{}) == nil || stmt.SQL == "" || stmt.DryRun {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.stmts = append(r.stmts, statement{sql: stmt.SQL, vars: stmt.Vars, inTx: stmt.InTx})
	})
}

// sampler is the server's code in this process, on the benchmark database, recording SQL.
type sampler struct {
	srv *server.Server
	st  *store.Store
	rec recorder
}

func newSampler(ctx context.Context, dbURL string, cursorSecret []byte) (*sampler, error) {
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	s := &sampler{st: st}
	if err := s.rec.install(st); err != nil {
		return nil, err
	}
	s.srv, err = server.New(server.Config{CursorSecret: cursorSecret}, server.Deps{
		Store: st, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (s *sampler) close() {
	_ = s.srv.Close()
	s.st.Close()
}

// capture serves req (after once serving warm, which fills the key cache) and returns the
// statements it ran. A non-2xx answer is an error: the sample must take the path the load takes.
func (s *sampler) capture(ctx context.Context, req, warm *http.Request) ([]statement, error) {
	if warm != nil {
		s.srv.ServeHTTP(httptest.NewRecorder(), warm)
	}
	s.rec.mu.Lock()
	s.rec.stmts = nil
	s.rec.mu.Unlock()
	w := httptest.NewRecorder()
	s.srv.ServeHTTP(w, req.WithContext(context.WithValue(ctx, captureKey{}, true)))
	if w.Code/100 != 2 {
		return nil, fmt.Errorf("sample %s %s: %d %s", req.Method, req.URL, w.Code, w.Body.String())
	}
	s.rec.mu.Lock()
	defer s.rec.mu.Unlock()
	return s.rec.stmts, nil
}

// substitution swaps the sample request's own values (ids, amounts, keyset times) for those
// of the request being replayed, inside strings too (JSON payloads that name the ids).
type substitution struct {
	strs  []string // old, new pairs for strings.NewReplacer
	ints  map[int64]int64
	times [][2]time.Time
}

func (sub *substitution) apply(vars []any) []any {
	if len(sub.strs) == 0 && len(sub.ints) == 0 && len(sub.times) == 0 {
		return vars
	}
	rep := strings.NewReplacer(sub.strs...)
	out := make([]any, len(vars))
	for i, v := range vars {
		switch x := v.(type) {
		case string:
			if len(sub.strs) > 0 {
				v = rep.Replace(x)
			}
		case []byte:
			if len(sub.strs) > 0 {
				v = []byte(rep.Replace(string(x)))
			}
		case int64:
			if n, ok := sub.ints[x]; ok {
				v = n
			}
		case time.Time:
			for _, t := range sub.times {
				if x.Equal(t[0]) {
					v = t[1]
				}
			}
		}
		out[i] = v
	}
	return out
}

// generatedIDs are the ids the server made up while serving the sample (payment, receipt,
// event): a replay needs fresh ones, or the primary keys refuse it.
func generatedIDs(stmts []statement) []string {
	var ids []string
	for _, st := range stmts {
		for _, v := range st.vars {
			if s, ok := v.(string); ok {
				for _, prefix := range []string{ride.PrefixPayment, ride.PrefixReceipt, ride.PrefixEvent} {
					if ride.ValidID(prefix, s) && !slices.Contains(ids, s) {
						ids = append(ids, s)
					}
				}
			}
		}
	}
	return ids
}

// lastRow is what a replay reports of a statement's result: the last row's raw values and
// the columns, for the walk to build the next keyset.
type lastRow struct {
	fields []string
	values [][]byte
}

// replay executes stmts on pool with sub applied, statements that ran in a transaction inside
// one pgx transaction, and reads every row. It returns the last row of statement keep (-1 for
// none).
func replay(ctx context.Context, pool *pgxpool.Pool, stmts []statement, sub *substitution, keep int) (lastRow, error) {
	var out lastRow
	var tx pgx.Tx
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return out, err
	}
	defer conn.Release()
	for i, st := range stmts {
		if st.inTx && tx == nil {
			if tx, err = conn.Begin(ctx); err != nil {
				return out, err
			}
		}
		if !st.inTx && tx != nil {
			if err := tx.Commit(ctx); err != nil {
				return out, err
			}
			tx = nil
		}
		var q interface {
			Query(context.Context, string, ...any) (pgx.Rows, error)
		} = conn
		if tx != nil {
			q = tx
		}
		rows, err := q.Query(ctx, st.sql, sub.apply(st.vars)...)
		if err != nil {
			return out, fmt.Errorf("replay %q: %w", st.sql, err)
		}
		for rows.Next() {
			if i == keep {
				out.values = slices.Clone(rows.RawValues())
				for j := range out.values {
					out.values[j] = slices.Clone(out.values[j])
				}
				if out.fields == nil {
					for _, f := range rows.FieldDescriptions() {
						out.fields = append(out.fields, f.Name)
					}
				}
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			if tx != nil {
				_ = tx.Rollback(ctx)
			}
			return out, fmt.Errorf("replay %q: %w", st.sql, err)
		}
	}
	if tx != nil {
		return out, tx.Commit(ctx)
	}
	return out, nil
}

// keyset reads created_at (binary timestamptz: microseconds since 2000-01-01) and id of a
// trips row.
func (r lastRow) keyset() (time.Time, string, bool) {
	var t time.Time
	var id string
	var haveT, haveID bool
	for i, f := range r.fields {
		switch {
		case f == "created_at" && !haveT && len(r.values[i]) == 8:
			us := int64(binary.BigEndian.Uint64(r.values[i]))
			t, haveT = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(us)*time.Microsecond), true
		case f == "id" && !haveID:
			id, haveID = string(r.values[i]), true
		}
	}
	return t, id, haveT && haveID
}

// describe renders captured statements for the report, one line each.
func describe(stmts []statement) string {
	var b strings.Builder
	inTx := false
	for _, st := range stmts {
		if st.inTx && !inTx {
			b.WriteString("      BEGIN\n")
		}
		if !st.inTx && inTx {
			b.WriteString("      COMMIT\n")
		}
		inTx = st.inTx
		sql := strings.Join(strings.Fields(st.sql), " ")
		if len(sql) > 220 {
			sql = sql[:120] + " … " + sql[len(sql)-90:]
		}
		fmt.Fprintf(&b, "      %s\n", sql)
	}
	if inTx {
		b.WriteString("      COMMIT\n")
	}
	return b.String()
}
