package webhooks_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/rideapi/ride/webhooks"
)

// A partner's receiver: verify the signature over the raw body, deduplicate on the event id
// (delivery is at least once: a retry may repeat an event already handled), answer 2xx fast
// and do the work afterwards.
func Example_receiver() {
	// The secret shown when the endpoint was registered. During a rotation, list the new and
	// the old one: either verifies.
	secrets := []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}

	var (
		mu   sync.Mutex
		seen = map[string]bool{} // in production: a unique index on the event id
	)
	receiver := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		if err := webhooks.Verify(body, r.Header.Get(webhooks.HeaderSignature), secrets, webhooks.DefaultTolerance); err != nil {
			// A 4xx tells Ride API not to retry: a forged or stale call will not improve.
			http.Error(w, "invalid signature", http.StatusBadRequest)
			fmt.Println("rejected:", err)
			return
		}
		var event webhooks.Event
		if err := json.Unmarshal(body, &event); err != nil {
			http.Error(w, "not an event", http.StatusBadRequest)
			return
		}
		mu.Lock()
		duplicate := seen[event.ID]
		seen[event.ID] = true
		mu.Unlock()
		if duplicate {
			fmt.Println("duplicate, acknowledged again:", event.ID)
			w.WriteHeader(http.StatusOK)
			return
		}
		fmt.Println("received:", event.Type, event.ID, "attempt", r.Header.Get(webhooks.HeaderAttempt))
		w.WriteHeader(http.StatusNoContent)
		// Process the event now, after answering, e.g. by handing it to a queue.
	})
	server := httptest.NewServer(receiver)
	defer server.Close()

	// What Ride API sends, made here with the package's signer.
	body := []byte(`{"id":"evt_7b3kq2x5m4n6p8r2s4t6v8w2y4","type":"trip.completed","created_at":"2026-11-21T12:00:00Z",` +
		`"data":{"trip_id":"trp_h3k2m4n5p6q7r8s9t2v3w4x5y6","fare":{"total":1850,"currency":"usd"},"completed_at":"2026-11-21T12:00:00Z"}}`)
	sign := func(attempt int, secret string) http.Header {
		h, err := webhooks.Headers("evt_7b3kq2x5m4n6p8r2s4t6v8w2y4", "trip.completed", attempt, time.Now(), body, []string{secret})
		if err != nil {
			panic(err)
		}
		return h
	}
	send := func(body []byte, h http.Header) {
		req, _ := http.NewRequest(http.MethodPost, server.URL, bytes.NewReader(body))
		req.Header = h
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		res.Body.Close()
	}

	send(body, sign(1, secrets[0]))
	send(body, sign(2, secrets[0]))                                                // a retry: the first answer was lost on the way back
	send(bytes.Replace(body, []byte("1850"), []byte("1"), 1), sign(3, secrets[0])) // tampered with
	send(body, sign(1, "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"))                  // signed with another secret

	// Output:
	// received: trip.completed evt_7b3kq2x5m4n6p8r2s4t6v8w2y4 attempt 1
	// duplicate, acknowledged again: evt_7b3kq2x5m4n6p8r2s4t6v8w2y4
	// rejected: webhooks: no valid signature
	// rejected: webhooks: no valid signature
}
