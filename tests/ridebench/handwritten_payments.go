package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rideapi/ride/server/ride"
)

// The hand-written server's POST /v1/payments is the yardstick of a write, as its reads are of
// the reads: what careful net/http + pgx code spends on the payment's durable work. It does
// what Ride API's payment does, in statements of its own: claim the Idempotency-Key (without
// waiting for the WAL flush), then in one READ COMMITTED transaction lock the trip with its
// city's rates, check it unpaid, charge the simulated provider, write the payment, its receipt
// and its event, and store the answer under the key. It leaves out what the benchmark never
// asks: a known key is refused 409 instead of replayed, a declined card is refused without a
// failed payment written, the caller is an admin (no rider check), and the body is checked
// for what the payment needs rather than against the OpenAPI document.

type hwPaymentRequest struct {
	TripID        string `json:"trip_id"`
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency"`
	PaymentMethod string `json:"payment_method"`
}

type hwPayment struct {
	Amount    int64     `json:"amount"`
	CreatedAt time.Time `json:"created_at"`
	Currency  string    `json:"currency"`
	ID        string    `json:"id"`
	Status    string    `json:"status"`
	TripID    string    `json:"trip_id"`
}

type hwPaymentEvent struct {
	PaymentID string `json:"payment_id"`
	TripID    string `json:"trip_id"`
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
	Status    string `json:"status"`
}

type hwLineItem struct {
	Kind   string `json:"kind"`
	Amount int64  `json:"amount"`
}

// hwPayableTrip is what the payment reads of its trip, locked.
type hwPayableTrip struct {
	status, fareCurrency string
	fare                 int64
	pickup, dropoff      ride.Point
	rates                ride.Rates
}

// errHWFailed rolls back a payment whose statement failed (its answer a 5xx): nothing is
// stored under its key, which is released for a retry.
var errHWFailed = errors.New("payment failed")

func (h *handwritten) pay(w http.ResponseWriter, r *http.Request) {
	account := h.authenticated(w, r)
	if account == "" {
		return
	}
	key := r.Header.Get("Idempotency-Key")
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	var in hwPaymentRequest
	if err == nil {
		err = json.Unmarshal(body, &in)
	}
	if key == "" || len(key) > 255 || err != nil || in.TripID == "" || in.Amount <= 0 || len(in.Currency) != 3 || in.PaymentMethod == "" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	ctx := r.Context()
	fingerprint := sha256.Sum256(body)
	var ownerBytes [16]byte
	_, _ = rand.Read(ownerBytes[:])
	owner := hex.EncodeToString(ownerBytes[:])
	now := time.Now().UTC().Truncate(time.Microsecond)
	claim, err := h.pool.Exec(ctx, `WITH async AS (SELECT set_config('synchronous_commit', 'off', true))
		INSERT INTO idempotency_records (account, idem_key, fingerprint, method, path, status, owner, locked_at, created_at)
		SELECT $1, $2, $3, 'POST', '/v1/payments', 'pending', $4, $5, $5 FROM async
		ON CONFLICT (account, idem_key) DO NOTHING`, account, key, hex.EncodeToString(fingerprint[:]), owner, now)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	if claim.RowsAffected() == 0 {
		http.Error(w, "idempotency key already used", http.StatusConflict)
		return
	}

	var status int
	var answer []byte
	err = pgx.BeginTxFunc(ctx, h.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		status, answer = h.payIn(r, tx, account, in, now)
		stored := http.Header{"Content-Type": {"application/json"}}
		if status == http.StatusCreated {
			stored.Set("Location", "/v1/trips/"+in.TripID+"/payment")
		}
		headers, _ := json.Marshal(stored)
		if status >= http.StatusInternalServerError {
			return errHWFailed
		}
		_, err := tx.Exec(ctx, `UPDATE idempotency_records
			SET status = 'completed', response_status = $1, response_headers = $2, response_body = $3, completed_at = $4
			WHERE account = $5 AND idem_key = $6 AND owner = $7 AND status = 'pending'`,
			status, string(headers), answer, now, account, key, owner)
		return err
	})
	if err != nil {
		// Nothing committed: free the key for a retry, even when the client went away.
		_, _ = h.pool.Exec(context.WithoutCancel(ctx), `UPDATE idempotency_records SET status = 'failed'
			WHERE account = $1 AND idem_key = $2 AND owner = $3 AND status = 'pending'`, account, key, owner)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	if status == http.StatusCreated {
		w.Header().Set("Location", "/v1/trips/"+in.TripID+"/payment")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
	w.WriteHeader(status)
	_, _ = w.Write(answer)
}

// payIn runs the payment in tx and returns its answer: 201 with the payment, a 4xx refusal,
// or a 5xx when a statement failed.
func (h *handwritten) payIn(r *http.Request, tx pgx.Tx, account string, in hwPaymentRequest, now time.Time) (int, []byte) {
	ctx := r.Context()
	refuse := func(status int, code string) (int, []byte) {
		return status, []byte(`{"code":"` + code + `"}`)
	}
	var t hwPayableTrip
	err := tx.QueryRow(ctx, `SELECT trips.status, trips.fare_total, trips.fare_currency,
		    trips.pickup_lat, trips.pickup_lng, trips.dropoff_lat, trips.dropoff_lng,
		    cities.currency, cities.base_fare, cities.per_km, cities.per_minute, cities.minimum_fare
		FROM trips JOIN cities ON cities.id = trips.city
		WHERE trips.id = $1 AND trips.account = $2 FOR UPDATE OF trips`, in.TripID, account).Scan(
		&t.status, &t.fare, &t.fareCurrency, &t.pickup.Lat, &t.pickup.Lng, &t.dropoff.Lat, &t.dropoff.Lng,
		&t.rates.Currency, &t.rates.BaseFare, &t.rates.PerKm, &t.rates.PerMinute, &t.rates.MinimumFare)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return refuse(http.StatusUnprocessableEntity, "trip_not_found")
	case err != nil:
		return refuse(http.StatusInternalServerError, "internal")
	}
	var paid bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM payments WHERE trip_id = $1 AND status = 'succeeded')`,
		in.TripID).Scan(&paid); err != nil {
		return refuse(http.StatusInternalServerError, "internal")
	}
	switch {
	case paid:
		return refuse(http.StatusConflict, "trip_already_paid")
	case t.status != "completed":
		return refuse(http.StatusConflict, "trip_not_completed")
	case in.Amount != t.fare || in.Currency != t.fareCurrency:
		return refuse(http.StatusUnprocessableEntity, "amount_mismatch")
	case in.PaymentMethod != "pm_card_visa":
		return refuse(http.StatusPaymentRequired, "card_declined")
	}

	p := hwPayment{ID: ride.NewID(ride.PrefixPayment), TripID: in.TripID, Amount: in.Amount, Currency: in.Currency,
		Status: "succeeded", CreatedAt: now}
	charge := sha256.Sum256([]byte(account + "/" + p.ID))
	written, err := tx.Exec(ctx, `INSERT INTO payments (id, trip_id, amount, currency, status, payment_method, provider_ref, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING`,
		p.ID, p.TripID, p.Amount, p.Currency, p.Status, in.PaymentMethod, "ch_sim_"+hex.EncodeToString(charge[:12]), now)
	switch {
	case err != nil:
		return refuse(http.StatusInternalServerError, "internal")
	case written.RowsAffected() == 0:
		return refuse(http.StatusConflict, "trip_already_paid")
	}
	lines := ride.ReceiptLines(p.Amount, t.pickup, t.dropoff, t.rates)
	items := make([]hwLineItem, len(lines))
	for i, l := range lines {
		items[i] = hwLineItem{Kind: string(l.Kind), Amount: l.Amount}
	}
	itemsJSON, _ := json.Marshal(items)
	if _, err := tx.Exec(ctx, `INSERT INTO receipts (id, trip_id, payment_id, amount, currency, line_items, issued_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		ride.NewID(ride.PrefixReceipt), p.TripID, p.ID, p.Amount, p.Currency, string(itemsJSON), now); err != nil {
		return refuse(http.StatusInternalServerError, "internal")
	}
	eventJSON, _ := json.Marshal(hwPaymentEvent{PaymentID: p.ID, TripID: p.TripID, Amount: p.Amount, Currency: p.Currency, Status: p.Status})
	if _, err := tx.Exec(ctx, `INSERT INTO events (id, account, type, subject_id, data, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)`,
		ride.NewID(ride.PrefixEvent), account, ride.EventPaymentSucceeded, p.TripID, string(eventJSON), now); err != nil {
		return refuse(http.StatusInternalServerError, "internal")
	}
	body, _ := json.Marshal(&p)
	return http.StatusCreated, body
}
