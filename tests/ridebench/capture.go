package main

import (
	"context"
	"encoding/binary"
	"errors"
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
	stmts, _, err := s.captureAnswer(ctx, req, warm)
	return stmts, err
}

// captureAnswer is capture that also returns the answer's body.
func (s *sampler) captureAnswer(ctx context.Context, req, warm *http.Request) ([]statement, []byte, error) {
	if warm != nil {
		s.srv.ServeHTTP(httptest.NewRecorder(), warm)
	}
	s.rec.mu.Lock()
	s.rec.stmts = nil
	s.rec.mu.Unlock()
	w := httptest.NewRecorder()
	s.srv.ServeHTTP(w, req.WithContext(context.WithValue(ctx, captureKey{}, true)))
	if w.Code/100 != 2 {
		return nil, nil, fmt.Errorf("sample %s %s: %d %s", req.Method, req.URL, w.Code, w.Body.String())
	}
	s.rec.mu.Lock()
	defer s.rec.mu.Unlock()
	return s.rec.stmts, w.Body.Bytes(), nil
}

// substitution swaps the sample request's own values (ids, amounts, coordinates, times) for
// those of the request being replayed, inside strings too (JSON payloads that name the ids).
type substitution struct {
	strs   []string // old, new pairs for strings.NewReplacer
	ints   map[int64]int64
	floats map[float64]float64
	times  [][2]time.Time
	// shift moves every time by this much (the times a request takes from the clock).
	shift time.Duration
	// bind, when set, takes a value from a statement's result for the statements after it.
	bind *binding

	rep *strings.Replacer // of strs, made on first use
}

// binding is a value the server read from the database and wrote into later statements, such
// as the driver a booking claimed: the sample's value (old) is replaced by what column of the
// last row of statement stmt holds in this replay. When stmt returns no row, otherwise (when
// set) runs next and gives the value, as the server reads elsewhere when the first read finds
// nothing.
type binding struct {
	stmt      int
	column    string
	old       string
	otherwise *statement
}

// set replaces old by new in the statements still to run.
func (sub *substitution) set(old, new string) {
	sub.strs = append(sub.strs, old, new)
	sub.rep = nil
}

func (sub *substitution) apply(vars []any) []any {
	if len(sub.strs) == 0 && len(sub.ints) == 0 && len(sub.floats) == 0 && len(sub.times) == 0 && sub.shift == 0 {
		return vars
	}
	if sub.rep == nil {
		sub.rep = strings.NewReplacer(sub.strs...)
	}
	out := make([]any, len(vars))
	for i, v := range vars {
		switch x := v.(type) {
		case string:
			if len(sub.strs) > 0 {
				v = sub.rep.Replace(x)
			}
		case []byte:
			if len(sub.strs) > 0 {
				v = []byte(sub.rep.Replace(string(x)))
			}
		case int64:
			if n, ok := sub.ints[x]; ok {
				v = n
			}
		case float64:
			if f, ok := sub.floats[x]; ok {
				v = f
			}
		case time.Time:
			v = sub.time(x)
		case *time.Time:
			if x != nil {
				t := sub.time(*x)
				v = &t
			}
		}
		out[i] = v
	}
	return out
}

func (sub *substitution) time(x time.Time) time.Time {
	for _, t := range sub.times {
		if x.Equal(t[0]) {
			return t[1]
		}
	}
	return x.Add(sub.shift)
}

// writes checks that stmts write each of tables (an INSERT INTO or an UPDATE of it): a
// capture that missed statements would have the reference replay less than the server runs,
// and every ratio against it would flatter the server.
func writes(stmts []statement, tables ...string) error {
	for _, table := range tables {
		found := false
		for _, st := range stmts {
			text := strings.Join(strings.Fields(st.sql), " ") + " "
			if strings.Contains(text, "INSERT INTO "+table+" ") || strings.Contains(text, `INSERT INTO "`+table+`"`) ||
				strings.Contains(text, "UPDATE "+table+" ") || strings.Contains(text, `UPDATE "`+table+`"`) {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("the captured statements write no %s: the capture missed some of what the server runs", table)
		}
	}
	return nil
}

// generatedIDs are the ids of the given kinds (say payment, receipt, event) that the server
// made up while serving the sample: a replay needs fresh ones, or the primary keys refuse it.
func generatedIDs(stmts []statement, prefixes ...string) []string {
	var ids []string
	for _, st := range stmts {
		for _, v := range st.vars {
			if s, ok := v.(string); ok {
				for _, prefix := range prefixes {
					if ride.ValidID(prefix, s) && !slices.Contains(ids, s) {
						ids = append(ids, s)
					}
				}
			}
		}
	}
	return ids
}

// freshIDs adds to sub a new id for each of ids, of the same kind.
func (sub *substitution) freshIDs(ids []string) {
	for _, id := range ids {
		prefix, _, _ := strings.Cut(id, "_")
		sub.strs = append(sub.strs, id, ride.NewID(prefix))
	}
	sub.rep = nil
}

// lastRow is what a replay reports of a statement's result: the last row's raw values and
// the columns, for the walk to build the next keyset.
type lastRow struct {
	fields []string
	values [][]byte
}

// errNoRow is a replay's statement that sub.bind takes a value from returning no row.
var errNoRow = errors.New("the statement the replay takes a value from returned no row")

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
			// As the store begins its transactions (WithTx).
			if tx, err = conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}); err != nil {
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
		bound := sub.bind != nil && sub.bind.stmt == i
		last, err := query(ctx, q, st, sub, i == keep || bound)
		if err == nil && bound {
			v, ok := last.text(sub.bind.column)
			if !ok && sub.bind.otherwise != nil {
				st = *sub.bind.otherwise
				if last, err = query(ctx, q, st, sub, true); err == nil {
					v, ok = last.text(sub.bind.column)
				}
			}
			if ok {
				sub.set(sub.bind.old, v)
			} else if err == nil {
				err = errNoRow
			}
		}
		if err != nil {
			if tx != nil {
				_ = tx.Rollback(ctx)
			}
			return out, fmt.Errorf("replay %q: %w", st.sql, err)
		}
		if i == keep {
			out = last
		}
	}
	if tx != nil {
		return out, tx.Commit(ctx)
	}
	return out, nil
}

// query runs st with sub applied and reads every row, keeping the last one when asked to.
func query(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, st statement, sub *substitution, keepLast bool) (lastRow, error) {
	var last lastRow
	rows, err := q.Query(ctx, st.sql, sub.apply(st.vars)...)
	if err != nil {
		return last, err
	}
	for rows.Next() {
		if keepLast {
			last.values = slices.Clone(rows.RawValues())
			for j := range last.values {
				last.values[j] = slices.Clone(last.values[j])
			}
			if last.fields == nil {
				for _, f := range rows.FieldDescriptions() {
					last.fields = append(last.fields, f.Name)
				}
			}
		}
	}
	rows.Close()
	return last, rows.Err()
}

// text is the value of column as text, when the row has it.
func (r lastRow) text(column string) (string, bool) {
	for i, f := range r.fields {
		if f == column {
			return string(r.values[i]), true
		}
	}
	return "", false
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
			b.WriteString("      BEGIN ISOLATION LEVEL READ COMMITTED\n")
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
