package main

import (
	"encoding/json"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rideapi/ride/webhooks"
)

// receiver is the partners' side: one local HTTP server for every endpoint (a path each) that
// verifies each delivery's signature, answers at once, and keeps a receipt of it.
type receiver struct {
	url     string
	secrets map[string]string // by path; written before the first delivery
	server  *http.Server
	// failEvery, when above 0, makes the receiver refuse one first attempt in failEvery with a
	// 500, chosen by the event id and path so that each delivery is refused at most once.
	failEvery atomic.Int64

	mu       sync.Mutex
	receipts []receipt
	invalid  int
}

// receipt is one attempt as it arrived.
type receipt struct {
	at      time.Time
	path    string
	eventID string
	created time.Time // the event's created_at
	attempt int
	acked   bool
}

func startReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{url: "http://" + ln.Addr().String(), secrets: map[string]string{}}
	r.server = &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.server.Serve(ln) }()
	return r, nil
}

func (r *receiver) close() { _ = r.server.Close() }

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	at := time.Now()
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	secret, known := r.secrets[req.URL.Path]
	if err != nil || !known || webhooks.Verify(body, req.Header.Get(webhooks.HeaderSignature), []string{secret}, webhooks.DefaultTolerance) != nil {
		r.mu.Lock()
		r.invalid++
		r.mu.Unlock()
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var event webhooks.Event
	_ = json.Unmarshal(body, &event)
	attempt, _ := strconv.Atoi(req.Header.Get("X-Ride-Delivery-Attempt"))
	rec := receipt{at: at, path: req.URL.Path, eventID: event.ID, created: event.CreatedAt, attempt: attempt, acked: true}
	if n := r.failEvery.Load(); n > 0 && attempt == 1 && refused(event.ID, req.URL.Path, n) {
		rec.acked = false
	}
	r.mu.Lock()
	r.receipts = append(r.receipts, rec)
	r.mu.Unlock()
	if !rec.acked {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// refused says whether the first attempt of event to path is one of the one in n refused.
func refused(eventID, path string, n int64) bool {
	h := fnv.New64a()
	_, _ = io.WriteString(h, eventID+path)
	return h.Sum64()%uint64(n) == 0
}

// since returns the receipts from index i on, and the index after them.
func (r *receiver) since(i int) ([]receipt, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]receipt(nil), r.receipts[i:]...), len(r.receipts)
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.receipts)
}

func (r *receiver) invalidCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.invalid
}
