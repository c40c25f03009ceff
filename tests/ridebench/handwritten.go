package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The hand-written server is the yardstick of the performance targets: a careful net/http + pgx
// server, no framework, no ORM, no OpenAPI validation, serving the hottest operations (a trip
// by id, first list pages) with the SQL their answers need (the trips and their drivers' public
// profiles, by the same indexes as Ride API's), the same cached bearer-key authentication and
// the same JSON as Ride API. Ride API's trip reads also join the rider and the driver's
// position, which an admin's answer does not show: the captured statements in the report say so. The benchmark starts it as a
// process of its own (this binary, re-executed with -handwritten), like the real server, and
// drives it in the same rounds, so the report can say how far the framework-and-ORM server is
// from what hand-written code reaches on the same machine in the same run.

const handwrittenColumns = `trips.id, trips.status, trips.ride_type, trips.city, trips.rider_id,
	trips.pickup_lat, trips.pickup_lng, trips.pickup_address, trips.dropoff_lat, trips.dropoff_lng,
	trips.dropoff_address, trips.pickup_time, trips.fare_total, trips.fare_currency, trips.eta_minutes,
	trips.created_at, trips.updated_at, trips.completed_at, trips.cancelled_at,
	drivers.id, drivers.name, drivers.rating, drivers.photo, trips.account`

type hwPlace struct {
	Address string  `json:"address"`
	Lat     float64 `json:"lat"`
	Lng     float64 `json:"lng"`
}

type hwTrip struct {
	account     string     // not shown: the caller's account must be the trip's
	CancelledAt *time.Time `json:"cancelled_at,omitempty"`
	City        string     `json:"city"`
	CompletedAt *time.Time `json:"completed_at,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	Driver      struct {
		ID     string  `json:"id"`
		Name   string  `json:"name"`
		Photo  string  `json:"photo"`
		Rating float64 `json:"rating"`
	} `json:"driver_summary"`
	Dropoff    hwPlace `json:"dropoff"`
	ETAMinutes int     `json:"eta_minutes"`
	Fare       struct {
		Currency string `json:"currency"`
		Total    int64  `json:"total"`
	} `json:"fare"`
	ID         string    `json:"id"`
	Pickup     hwPlace   `json:"pickup"`
	PickupTime time.Time `json:"pickup_time"`
	RideType   string    `json:"ride_type"`
	RiderID    string    `json:"rider_id"`
	Status     string    `json:"status"`
	UpdatedAt  time.Time `json:"updated_at"`
}

func scanHWTrip(row pgx.Row, t *hwTrip) error {
	return row.Scan(&t.ID, &t.Status, &t.RideType, &t.City, &t.RiderID,
		&t.Pickup.Lat, &t.Pickup.Lng, &t.Pickup.Address, &t.Dropoff.Lat, &t.Dropoff.Lng,
		&t.Dropoff.Address, &t.PickupTime, &t.Fare.Total, &t.Fare.Currency, &t.ETAMinutes,
		&t.CreatedAt, &t.UpdatedAt, &t.CompletedAt, &t.CancelledAt,
		&t.Driver.ID, &t.Driver.Name, &t.Driver.Rating, &t.Driver.Photo, &t.account)
}

type handwritten struct {
	pool   *pgxpool.Pool
	secret []byte
	keys   sync.Map // SHA-256 of a bearer key → its account: looked up once, then cached
}

// profileHandwritten, when set (a build with -tags pprof), serves the hand-written server's
// profile beside it.
var profileHandwritten func()

// serveHandwritten is the -handwritten mode of this binary: it serves until killed.
func serveHandwritten(addr, dbURL string) error {
	if profileHandwritten != nil {
		profileHandwritten()
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	h := &handwritten{pool: pool, secret: []byte("handwritten-cursor-secret")}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/trips/{id}", h.trip)
	mux.HandleFunc("GET /v1/trips", func(w http.ResponseWriter, r *http.Request) {
		h.page(w, r, "trips.status", r.URL.Query().Get("status"))
	})
	mux.HandleFunc("GET /v1/drivers/{id}/trips", func(w http.ResponseWriter, r *http.Request) {
		h.page(w, r, "trips.driver_id", r.PathValue("id"))
	})
	mux.HandleFunc("POST /v1/payments", h.pay)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	return (&http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}).ListenAndServe()
}

// authenticated returns the account of the request's bearer key, or answers 401 and "".
func (h *handwritten) authenticated(w http.ResponseWriter, r *http.Request) string {
	secret, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	sum := sha256.Sum256([]byte(secret))
	if account, cached := h.keys.Load(sum); ok && cached {
		return account.(string)
	}
	var account string
	if ok {
		err := h.pool.QueryRow(r.Context(), `SELECT account FROM api_keys WHERE hash = $1 AND revoked_at IS NULL`,
			hex.EncodeToString(sum[:])).Scan(&account)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			http.Error(w, "internal error", http.StatusInternalServerError)
			return ""
		}
	}
	if account == "" {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return ""
	}
	h.keys.Store(sum, account)
	return account
}

func (h *handwritten) trip(w http.ResponseWriter, r *http.Request) {
	account := h.authenticated(w, r)
	if account == "" {
		return
	}
	var t hwTrip
	err := scanHWTrip(h.pool.QueryRow(r.Context(), `SELECT `+handwrittenColumns+`
		FROM trips JOIN drivers ON drivers.id = trips.driver_id WHERE trips.id = $1`, r.PathValue("id")), &t)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && t.account != account) {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	writeJSON(w, &t)
}

// page is a first page of the caller's account's trips whose column (a constant of this file)
// equals value, newest first.
func (h *handwritten) page(w http.ResponseWriter, r *http.Request, column, value string) {
	account := h.authenticated(w, r)
	if account == "" {
		return
	}
	limit := 20
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			http.Error(w, "bad limit", http.StatusBadRequest)
			return
		}
		limit = n
	}
	rows, err := h.pool.Query(r.Context(), `SELECT `+handwrittenColumns+`
		FROM trips JOIN drivers ON drivers.id = trips.driver_id WHERE trips.account = $1 AND `+column+` = $2
		ORDER BY trips.created_at DESC, trips.id DESC LIMIT $3`, account, value, limit+1)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	page := struct {
		Data       []hwTrip `json:"data"`
		Pagination struct {
			HasMore    bool   `json:"has_more"`
			NextCursor string `json:"next_cursor,omitempty"`
		} `json:"pagination"`
	}{Data: make([]hwTrip, 0, limit+1)}
	for rows.Next() {
		page.Data = append(page.Data, hwTrip{})
		if err := scanHWTrip(rows, &page.Data[len(page.Data)-1]); err != nil {
			rows.Close()
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
	}
	if rows.Err() != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	if len(page.Data) > limit {
		page.Data, page.Pagination.HasMore = page.Data[:limit], true
		last := page.Data[limit-1]
		page.Pagination.NextCursor = h.cursor(last.CreatedAt, last.ID)
	}
	writeJSON(w, &page)
}

// cursor is an opaque, signed keyset: the row's created_at and id, and an HMAC over them.
func (h *handwritten) cursor(t time.Time, id string) string {
	payload := strconv.AppendInt(nil, t.UnixMicro(), 10)
	payload = append(append(payload, '.'), id...)
	mac := hmac.New(sha256.New, h.secret)
	mac.Write(payload)
	return base64.RawURLEncoding.EncodeToString(mac.Sum(payload))
}

func writeJSON(w http.ResponseWriter, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

// startHandwritten runs this binary in -handwritten mode on addr and waits until it answers.
func startHandwritten(ctx context.Context, addr, dbURL string) (stop func(), err error) {
	if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
		c.Close()
		return nil, fmt.Errorf("%s is already taken (a hand-written server left by an earlier run?): stop it or pass -hw-addr", addr)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self, "-handwritten", addr, "-handwritten-db", dbURL)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop = func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if res, err := http.Get("http://" + addr + "/readyz"); err == nil {
			res.Body.Close()
			servers.handwritten = cmd.Process.Pid
			return stop, nil
		}
	}
	stop()
	return nil, fmt.Errorf("hand-written server not ready on %s within 10s", addr)
}
