package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/store/storetest"
	"github.com/rideapi/ride/webhooks"
)

// Call is one request a Receiver got.
type Call struct {
	At      time.Time
	Header  http.Header
	Body    []byte
	EventID string
	Attempt int
	// Nth counts the calls for this event id so far, this one included.
	Nth int
}

// Answer is what a Receiver replies to a call.
type Answer struct {
	Status int
	Header map[string]string
	// Hang keeps the request open until the client gives up (a timeout or a shutdown).
	Hang bool
	// Delay is how long the receiver takes before answering.
	Delay time.Duration
}

// Receiver is a partner's webhook receiver on 127.0.0.1. It records every call as it arrives
// and answers what answer says (200 when nil).
type Receiver struct {
	*httptest.Server
	answer func(Call) Answer

	mu       sync.Mutex
	calls    []Call
	perEvent map[string]int
}

// NewReceiver starts a receiver on a free port of 127.0.0.1, closed after the spec.
func NewReceiver(answer func(Call) Answer) *Receiver {
	return NewReceiverOn("127.0.0.1:0", answer)
}

// NewBrokenReceiver starts a receiver that answers status until fix is called, 200 after.
func NewBrokenReceiver(status int) (r *Receiver, fix func()) {
	var fixed atomic.Bool
	r = NewReceiver(func(Call) Answer {
		if fixed.Load() {
			return Answer{Status: http.StatusOK}
		}
		return Answer{Status: status}
	})
	return r, func() { fixed.Store(true) }
}

// NewReceiverOn starts a receiver on addr, e.g. the port of one that went down.
func NewReceiverOn(addr string, answer func(Call) Answer) *Receiver {
	GinkgoHelper()
	r := &Receiver{answer: answer, perEvent: map[string]int{}}
	ln, err := net.Listen("tcp", addr)
	Expect(err).NotTo(HaveOccurred())
	r.Server = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	r.Server.Listener = ln
	r.Server.Start()
	DeferCleanup(r.Server.Close)
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	at := time.Now()
	body, _ := io.ReadAll(req.Body)
	c := Call{At: at, Header: req.Header.Clone(), Body: body, EventID: req.Header.Get(webhooks.HeaderEventID)}
	c.Attempt, _ = strconv.Atoi(req.Header.Get(webhooks.HeaderAttempt))
	r.mu.Lock()
	r.perEvent[c.EventID]++
	c.Nth = r.perEvent[c.EventID]
	r.calls = append(r.calls, c)
	r.mu.Unlock()

	a := Answer{Status: http.StatusOK}
	if r.answer != nil {
		a = r.answer(c)
	}
	if a.Hang {
		select {
		case <-req.Context().Done():
		case <-time.After(30 * time.Second):
		}
		return
	}
	time.Sleep(a.Delay)
	for k, v := range a.Header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(a.Status)
}

// Calls returns every call so far, in arrival order.
func (r *Receiver) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.calls...)
}

// CallsFor returns the calls that carried one event.
func (r *Receiver) CallsFor(eventID string) []Call {
	var out []Call
	for _, c := range r.Calls() {
		if c.EventID == eventID {
			out = append(out, c)
		}
	}
	return out
}

// RegisterEndpoint registers url for the event kinds through the API and deletes it after
// the spec, so that no later spec's events go to it. It returns the endpoint's id and secret.
func (h *Harness) RegisterEndpoint(url string, events ...string) (id, secret string) {
	GinkgoHelper()
	id, secret = h.RegisterEndpointKept(url, events...)
	DeferCleanup(func() {
		h.Do(Request{Method: http.MethodDelete, Path: "/v1/webhook-endpoints/" + id, Key: h.Admin})
	})
	return id, secret
}

// RegisterEndpointKept registers an endpoint that outlives the spec: for isolated databases,
// which go away anyway, and whose servers a spec may have stopped.
func (h *Harness) RegisterEndpointKept(url string, events ...string) (id, secret string) {
	GinkgoHelper()
	res := h.Do(Request{Method: http.MethodPost, Path: "/v1/webhook-endpoints", Key: h.Admin,
		Body: map[string]any{"url": url, "events": events}})
	Expect(res.Status).To(Equal(http.StatusCreated), "%s", res.Body)
	body := res.JSON()
	return body["id"].(string), body["secret"].(string)
}

// AppendEvent writes an event of the given kind about a new subject, created now, with the
// data the contract gives that kind: what the trip and payment operations write.
func (h *Harness) AppendEvent(eventType string) store.Event {
	GinkgoHelper()
	return h.AppendEventAt(eventType, time.Now())
}

// AppendEventAt is AppendEvent with the event's creation time given.
func (h *Harness) AppendEventAt(eventType string, at time.Time) store.Event {
	GinkgoHelper()
	e, err := h.Store.AppendEvent(context.Background(), newEvent(eventType, at))
	Expect(err).NotTo(HaveOccurred())
	return e
}

func newEvent(eventType string, at time.Time) store.Event {
	at = at.UTC().Truncate(time.Microsecond)
	trip := ride.NewID(ride.PrefixTrip)
	subject := trip
	var data any
	switch eventType {
	case "trip.completed":
		data = map[string]any{"trip_id": trip, "fare": map[string]any{"total": 1850, "currency": "usd"}, "completed_at": at}
	case "payment.succeeded", "payment.failed":
		subject = ride.NewID(ride.PrefixPayment)
		d := map[string]any{"payment_id": subject, "trip_id": trip, "amount": 1850, "currency": "usd", "status": "succeeded"}
		if eventType == "payment.failed" {
			d["status"], d["failure_code"] = "failed", "card_declined"
		}
		data = d
	default:
		status := map[string]string{"trip.created": "accepted", "trip.arriving": "arriving",
			"trip.started": "in_progress", "trip.cancelled": "cancelled"}[eventType]
		data = map[string]any{"trip_id": trip, "status": status, "occurred_at": at}
	}
	b, err := json.Marshal(data)
	Expect(err).NotTo(HaveOccurred())
	return store.Event{ID: ride.NewID(ride.PrefixEvent), Account: store.DefaultAccount, Type: eventType, SubjectID: subject, Data: string(b), CreatedAt: at}
}

// Deliveries reads an endpoint's deliveries log through the API, newest first.
func (h *Harness) Deliveries(endpointID string) []map[string]any {
	GinkgoHelper()
	res := h.GET("/v1/webhook-endpoints/"+endpointID+"/deliveries?limit=100", h.Admin)
	Expect(res.Status).To(Equal(http.StatusOK), "%s", res.Body)
	var page struct {
		Data []map[string]any `json:"data"`
	}
	res.Decode(&page)
	return page.Data
}

// IsolatedHarness serves a new, empty database of h's engine with cfg, for specs that start,
// stop and multiply servers: the shared harness's worker does not see it. Everything is torn
// down after the spec.
func (h *Harness) IsolatedHarness(ctx context.Context, cfg server.Config, startWorker bool) *Harness {
	GinkgoHelper()
	var url string
	switch h.Engine {
	case "sqlite":
		url = "sqlite://" + filepath.Join(GinkgoT().TempDir(), fmt.Sprintf("isolated-%d.db", time.Now().UnixNano()))
	case "postgres":
		var drop func()
		var err error
		url, drop, err = storetest.NewPostgresDatabase(ctx, os.Getenv("TEST_DATABASE_URL"))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(drop)
	}
	return h.ServerOn(ctx, url, cfg, startWorker)
}

// ServerOn starts one more server (with a store of its own) on the database at url, stopped
// after the spec.
func (h *Harness) ServerOn(ctx context.Context, url string, cfg server.Config, startWorker bool) *Harness {
	GinkgoHelper()
	other := &Harness{Engine: h.Engine}
	other.startWith(ctx, url, cfg, startWorker)
	DeferCleanup(other.Stop)
	return other
}

// StopWorker stops the server's background work (the delivery worker) and waits for it.
func (h *Harness) StopWorker() {
	Expect(h.server.Close()).To(Succeed())
}

// Stop stops the worker, the HTTP server and the store. Stopping again does nothing.
func (h *Harness) Stop() {
	if h.server != nil {
		_ = h.server.Close()
	}
	if h.httpServer != nil {
		h.httpServer.Close()
		h.httpServer = nil
	}
	if h.Store != nil {
		_ = h.Store.Close()
		h.Store = nil
	}
}
