package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

type bench struct {
	o       options
	base    string
	key     string
	secret  []byte
	smp     samples
	pool    *pgxpool.Pool
	sampler *sampler

	payServer, payRef []payableTrip
	payServerNext     atomic.Int64
	payRefNext        atomic.Int64

	// fleet is the booking scenario's world (nil when -only leaves it out); bookingDBs the
	// databases bookings are made on, -db's first.
	fleet      *fleet
	bookingDBs []*bookingDB
}

// scenario is one hot path: how to ask the server, and what SQL the reference runs for it.
type scenario struct {
	name string
	// refNote says what the reference executes, for the report.
	refNote string
	sql     []statement
	// http asks the worker's target (w.t): the server, or another one answering the same API.
	http func(ctx context.Context, w *worker) error
	// reference runs the scenario's captured SQL with this iteration's values.
	reference func(ctx context.Context, w *worker) error
	// handwritten says that the hand-written server answers http's requests too.
	handwritten bool
	// sqlite says that http runs on the SQLite server too.
	sqlite bool
	// rest, when set, is the REST request for the same data, run on the server in the same
	// rounds: GraphQL's figures are held against it.
	rest func(ctx context.Context, w *worker) error
	// around, when set, is called before each run of the scenario on a side and returns what
	// to do after it (the booking's fleet); it is not measured.
	around func(ctx context.Context, s side) (func(), error)
	// perRequest names what one measured call is, when it is not one request (the report's
	// footnote).
	perRequest string
}

// side is who answers one run of a scenario.
type side int

const (
	sideServer side = iota
	sideReference
	sideHandwritten
	sideCompare
	sideSQLite
	sideREST
)

// target is a server the load goes to: its address, an admin key it accepts, and the rows of
// its database that requests draw from.
type target struct {
	addr string
	key  string
	smp  *samples
}

// on is op with its HTTP requests sent to t.
func on(t *target, op func(context.Context, *worker) error) func(context.Context, *worker) error {
	return func(ctx context.Context, w *worker) error {
		w.t = t
		return op(ctx, w)
	}
}

const graphQLSeed = `query Trip($id: ID!) { trip(id: $id) { status etaMinutes driver { name rating photo } fare { total currency } } }`

func (b *bench) request(method, path string, body any) *http.Request {
	var r io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		r = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, b.base+path, r)
	req.Header.Set("Authorization", "Bearer "+b.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// do sends req on w's connection, to w's target when it has one, and fails on any status but
// want; it returns the body, valid until w's next request.
func (b *bench) do(w *worker, req *http.Request, want int) ([]byte, error) {
	if w.t != nil {
		req.URL.Host, req.Host = w.t.addr, w.t.addr
		req.Header.Set("Authorization", "Bearer "+w.t.key)
	}
	status, body, err := w.http.roundTrip(req)
	if err != nil {
		return nil, err
	}
	if status != want {
		return nil, fmt.Errorf("%s %s: %d %s", req.Method, req.URL.Path, status, bytes.TrimSpace(body))
	}
	return body, nil
}

// inProcess is req aimed at the sampler instead of the running server.
func inProcess(req *http.Request) *http.Request {
	r := req.Clone(req.Context())
	r.URL.Scheme, r.URL.Host, r.Host, r.RequestURI = "", "", "", ""
	r.Body = http.NoBody // as a server sees a request without a body
	if req.GetBody != nil {
		r.Body, _ = req.GetBody()
	}
	return r
}

func (b *bench) scenarios(ctx context.Context) ([]*scenario, error) {
	pick := func(w *worker, ids []string) string { return ids[w.rng.IntN(len(ids))] }
	// Requests draw from the rows of the target's database (w.t.smp); the reference from -db's.
	sampleTrip, sampleDriver := b.smp.tripIDs[0], b.smp.driverIDs[0]
	warm := inProcess(b.request(http.MethodGet, "/v1/trips?limit=1", nil))
	capture := func(req *http.Request) ([]statement, error) {
		return b.sampler.capture(ctx, inProcess(req), warm)
	}
	swap := func(old, new string) *substitution { return &substitution{strs: []string{old, new}} }
	none := &substitution{}

	var out []*scenario
	// GET /v1/trips/{id}
	getSQL, err := capture(b.request(http.MethodGet, "/v1/trips/"+sampleTrip, nil))
	if err != nil {
		return nil, err
	}
	getTrip := &scenario{
		name: "GET /v1/trips/{id}", sql: getSQL,
		refNote: "the trip joined with its driver, by primary key",
		http: func(ctx context.Context, w *worker) error {
			_, err := b.do(w, b.request(http.MethodGet, "/v1/trips/"+pick(w, w.t.smp.tripIDs), nil), http.StatusOK)
			return err
		},
		reference: func(ctx context.Context, w *worker) error {
			_, err := replay(ctx, b.pool, getSQL, swap(sampleTrip, pick(w, b.smp.tripIDs)), -1)
			return err
		},
		handwritten: true, sqlite: true,
	}
	out = append(out, getTrip)

	// GET /v1/trips?status=completed&limit=20, first page
	const listPath = "/v1/trips?status=completed&limit=20"
	firstSQL, err := capture(b.request(http.MethodGet, listPath, nil))
	if err != nil {
		return nil, err
	}
	out = append(out, &scenario{
		name: "GET /v1/trips first page", sql: firstSQL,
		refNote: "the keyset query (limit+1 rows joined with drivers); a first page has no probe",
		http: func(ctx context.Context, w *worker) error {
			_, err := b.do(w, b.request(http.MethodGet, listPath, nil), http.StatusOK)
			return err
		},
		reference: func(ctx context.Context, w *worker) error {
			_, err := replay(ctx, b.pool, firstSQL, none, -1)
			return err
		},
		handwritten: true, sqlite: true,
	})

	// Deep pages: each client walks the list by next_cursor, from the top, again and again.
	var keyT time.Time
	var keyID string
	if err := b.pool.QueryRow(ctx, `SELECT created_at, id FROM trips WHERE status = 'completed'
		ORDER BY created_at DESC, id DESC OFFSET 1000 LIMIT 1`).Scan(&keyT, &keyID); err != nil {
		return nil, err
	}
	admin := auth.Principal{Role: auth.RoleAdmin, Account: auth.DefaultAccount}
	cursor := server.TripListCursor(b.secret, admin, gen.Completed, store.Keyset{Values: []int64{keyT.UnixMicro()}, ID: keyID})
	deepSQL, err := capture(b.request(http.MethodGet, listPath+"&cursor="+cursor, nil))
	if err != nil {
		return nil, err
	}
	out = append(out, &scenario{
		name: "GET /v1/trips walk (cursors)", sql: deepSQL,
		refNote: "per page the keyset query after the previous page's last row, with the existence probe of the other direction as a column ((SELECT 1 … ORDER BY … LIMIT 1) IS NOT NULL)",
		http: func(ctx context.Context, w *worker) error {
			path := listPath
			if w.cursor != "" {
				path += "&cursor=" + w.cursor
			}
			body, err := b.do(w, b.request(http.MethodGet, path, nil), http.StatusOK)
			if err != nil {
				w.cursor = ""
				return err
			}
			w.cursor, err = nextCursor(body)
			return err
		},
		reference: func(ctx context.Context, w *worker) error {
			stmts, sub, keep := firstSQL, none, 0
			if w.keyID != "" {
				stmts, keep = deepSQL, 0
				sub = &substitution{strs: []string{keyID, w.keyID}, times: [][2]time.Time{{keyT, w.keyT}}}
			}
			last, err := replay(ctx, b.pool, stmts, sub, keep)
			if err != nil {
				w.keyID = ""
				return err
			}
			t, id, ok := last.keyset()
			if !ok {
				w.keyID = ""
				return nil
			}
			w.keyT, w.keyID = t, id
			return nil
		},
	})

	// GET /v1/drivers/{id}/trips
	driverSQL, err := capture(b.request(http.MethodGet, "/v1/drivers/"+sampleDriver+"/trips", nil))
	if err != nil {
		return nil, err
	}
	out = append(out, &scenario{
		name: "GET /v1/drivers/{id}/trips", sql: driverSQL,
		refNote: "the keyset query on the driver's index (only an empty page looks the driver up)",
		http: func(ctx context.Context, w *worker) error {
			_, err := b.do(w, b.request(http.MethodGet, "/v1/drivers/"+pick(w, w.t.smp.driverIDs)+"/trips", nil), http.StatusOK)
			return err
		},
		reference: func(ctx context.Context, w *worker) error {
			_, err := replay(ctx, b.pool, driverSQL, swap(sampleDriver, pick(w, b.smp.driverIDs)), -1)
			return err
		},
		handwritten: true, sqlite: true,
	})

	// POST /v1/payments with a fresh Idempotency-Key each, each paying another trip.
	payBody := func(t payableTrip) any {
		return map[string]any{"trip_id": t.id, "amount": t.fare, "currency": "usd", "payment_method": "pm_card_visa"}
	}
	payReq := func(t payableTrip, key string) *http.Request {
		req := b.request(http.MethodPost, "/v1/payments", payBody(t))
		req.Header.Set("Idempotency-Key", key)
		return req
	}
	samplePay := b.payRef[len(b.payRef)-1]
	b.payRef = b.payRef[:len(b.payRef)-1]
	sampleKey := ride.NewID("bench")
	paySQL, err := capture(payReq(samplePay, sampleKey))
	if err == nil {
		err = writes(paySQL, "idempotency_records", "payments", "receipts", "events")
	}
	if err != nil {
		return nil, fmt.Errorf("POST /v1/payments: %w", err)
	}
	generated := generatedIDs(paySQL, ride.PrefixPayment, ride.PrefixReceipt, ride.PrefixEvent)
	out = append(out, &scenario{
		name: "POST /v1/payments", sql: paySQL,
		refNote: "the idempotency claim, then in one transaction: what the payment needs of the trip with its city's rates (locked), paid check, payment, receipt, event, stored answer",
		http: func(ctx context.Context, w *worker) error {
			i := b.payServerNext.Add(1) - 1
			if int(i) >= len(b.payServer) {
				return errNoPayableTrips()
			}
			_, err := b.do(w, payReq(b.payServer[i], ride.NewID("bench")), http.StatusCreated)
			return err
		},
		reference: func(ctx context.Context, w *worker) error {
			i := b.payRefNext.Add(1) - 1
			if int(i) >= len(b.payRef) {
				return errNoPayableTrips()
			}
			t := b.payRef[i]
			sub := &substitution{strs: []string{samplePay.id, t.id, sampleKey, ride.NewID("bench")},
				ints: map[int64]int64{samplePay.fare: t.fare}}
			sub.freshIDs(generated)
			_, err := replay(ctx, b.pool, paySQL, sub, -1)
			return err
		},
		handwritten: true,
	})

	// The GraphQL seed query.
	gqlReq := func(id string) *http.Request {
		return b.request(http.MethodPost, "/v1/graphql", map[string]any{"query": graphQLSeed, "variables": map[string]string{"id": id}})
	}
	gqlSQL, err := capture(gqlReq(sampleTrip))
	if err != nil {
		return nil, err
	}
	out = append(out, &scenario{
		name: "POST /v1/graphql trip", sql: gqlSQL,
		refNote: "the statements the resolvers ran for one trip",
		http: func(ctx context.Context, w *worker) error {
			body, err := b.do(w, gqlReq(pick(w, w.t.smp.tripIDs)), http.StatusOK)
			if err == nil && bytes.Contains(body, []byte(`"errors"`)) {
				return fmt.Errorf("graphql errors: %s", body)
			}
			return err
		},
		reference: func(ctx context.Context, w *worker) error {
			_, err := replay(ctx, b.pool, gqlSQL, swap(sampleTrip, pick(w, b.smp.tripIDs)), -1)
			return err
		},
		sqlite: true, rest: getTrip.http,
	})
	if b.fleet != nil {
		sc, err := b.bookingScenario(ctx, warm)
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, nil
}

// errNoPayableTrips reports that the payment scenario used up its trips (a longer -d than the
// sample was sized for); it waits a little first, so that clients do not spin on it.
// nextCursor is a page's pagination.next_cursor ("" on the last page), found without decoding
// the page: on a small machine the load generator's CPU is the server's loss, and decoding 20
// trips with encoding/json to find one member costs far more than the scan. The member
// cannot be matched inside a string value, where every quote is escaped, and a cursor is
// base64url, so it holds no escapes either.
func nextCursor(page []byte) (string, error) {
	const member = `"next_cursor":`
	i := bytes.LastIndex(page, []byte(member))
	if i < 0 {
		return "", fmt.Errorf("no pagination.next_cursor in the page: %.200s", page)
	}
	rest := page[i+len(member):]
	if bytes.HasPrefix(rest, []byte("null")) {
		return "", nil
	}
	end := bytes.IndexByte(rest[min(1, len(rest)):], '"')
	if len(rest) == 0 || rest[0] != '"' || end < 0 {
		return "", fmt.Errorf("pagination.next_cursor is not a string: %.200s", rest)
	}
	return string(rest[1 : 1+end]), nil
}

func errNoPayableTrips() error {
	time.Sleep(10 * time.Millisecond)
	return errors.New("no payable trips left")
}
