package tests

import (
	"crypto/rand"
	"fmt"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/store"
)

// loc is a request location north and east meters from c's center.
func loc(c store.City, north, east float64) map[string]any {
	p := PointIn(c, north, east)
	return map[string]any{"lat": p.Lat, "lng": p.Lng}
}

// estimateBody asks for a trip across c: from 2 km north-east of its center to 3 km south-west.
func estimateBody(c store.City, rideType string) map[string]any {
	origin := loc(c, 2_000, 1_000)
	origin["address"] = "1 Market St"
	return map[string]any{"origin": origin, "destination": loc(c, -3_000, -2_000), "ride_type": rideType}
}

// NewEstimate asks key for an economy estimate across c and expects it.
func (h *Harness) NewEstimate(key string, c store.City) gen.FareEstimate {
	GinkgoHelper()
	res := h.Do(Request{Method: http.MethodPost, Path: "/v1/fare-estimates", Key: key, Body: estimateBody(c, "economy")})
	Expect(res.Status).To(Equal(http.StatusCreated), "%s", res.Body)
	var e gen.FareEstimate
	res.Decode(&e)
	return e
}

// Book posts a booking with a fresh Idempotency-Key.
func (h *Harness) Book(key string, body map[string]any) *Response {
	GinkgoHelper()
	return h.Do(Request{Method: http.MethodPost, Path: "/v1/rides", Key: key, Body: body,
		Header: map[string]string{"Idempotency-Key": newIdempotencyKey()}})
}

// BookTrip books the estimate as key and expects the trip.
func (h *Harness) BookTrip(key, estimateID string) gen.Trip {
	GinkgoHelper()
	res := h.Book(key, map[string]any{"estimate_id": estimateID})
	Expect(res.Status).To(Equal(http.StatusCreated), "%s", res.Body)
	var t gen.Trip
	res.Decode(&t)
	return t
}

// PutStatus asks for a trip's status with PUT, with extra headers (If-Match) when given.
func (h *Harness) PutStatus(key, tripID, status string, header map[string]string) *Response {
	GinkgoHelper()
	return h.Do(Request{Method: http.MethodPut, Path: "/v1/trips/" + tripID, Key: key,
		Body: map[string]any{"status": status}, Header: header})
}

// Cancel posts a cancellation of the trip.
func (h *Harness) Cancel(key, tripID, reason string) *Response {
	GinkgoHelper()
	return h.Do(Request{Method: http.MethodPost, Path: "/v1/trips/" + tripID + "/cancellations", Key: key,
		Body: map[string]any{"reason": reason}})
}

// ExpectProblem checks an error answer's status and code.
func ExpectProblem(res *Response, status int, code string) {
	GinkgoHelper()
	Expect(res.Status).To(Equal(status), "%s", res.Body)
	Expect(res.Problem().Code).To(Equal(code))
}

// EventTypes lists the types of the events about a subject, in the order they were written.
func (h *Harness) EventTypes(subjectID string) []string {
	GinkgoHelper()
	events, err := h.Store.EventsBySubject(GinkgoT().Context(), subjectID)
	Expect(err).NotTo(HaveOccurred())
	types := []string{}
	for _, e := range events {
		types = append(types, e.Type)
	}
	return types
}

// newIdempotencyKey is a UUID v4, as clients are told to send.
func newIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
