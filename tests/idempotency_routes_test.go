package tests

import (
	"net/http"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/rideapi/ride/server/auth"
)

// One idempotency mechanism serves every POST: these cross the operations of booking,
// estimates and payments.
var _ = ForEachEngine("Idempotency across operations", func(h *Harness) {
	It("replays a booking byte for byte, and books once", func() {
		city := h.NewCity(CityOpts{})
		h.NewDriver(DriverOpts{City: city.ID, North: 1_000})
		h.NewDriver(DriverOpts{City: city.ID, North: 2_000})
		rider := h.NewRider()
		riderKey := h.Key(auth.RoleRider, rider.ID)
		estimate := h.NewEstimate(riderKey, city)
		key := newIdempotencyKey()
		book := func() *Response {
			return h.Do(Request{Method: http.MethodPost, Path: "/v1/rides", Key: riderKey,
				Header: map[string]string{"Idempotency-Key": key}, Body: map[string]any{"estimate_id": estimate.EstimateId}})
		}
		first, again := book(), book()
		Expect(first.Status).To(Equal(http.StatusCreated), "%s", first.Body)
		Expect(again.Status).To(Equal(http.StatusCreated))
		Expect(again.Body).To(Equal(first.Body))
		Expect(again.Header.Get("Idempotent-Replayed")).To(Equal("true"))
		Expect(again.Header.Get("Location")).To(Equal(first.Header.Get("Location")))
		Expect(first.Header.Get("Idempotent-Replayed")).To(BeEmpty())
	})

	It("refuses a key reused on another route with 422 idempotency_key_reused", func() {
		city := h.NewCity(CityOpts{})
		rider := h.NewRider()
		riderKey := h.Key(auth.RoleRider, rider.ID)
		key := newIdempotencyKey()
		estimate := h.Do(Request{Method: http.MethodPost, Path: "/v1/fare-estimates", Key: riderKey,
			Header: map[string]string{"Idempotency-Key": key}, Body: estimateBody(city, "economy")})
		Expect(estimate.Status).To(Equal(http.StatusCreated), "%s", estimate.Body)
		res := h.Do(Request{Method: http.MethodPost, Path: "/v1/payments", Key: riderKey,
			Header: map[string]string{"Idempotency-Key": key},
			Body:   map[string]any{"trip_id": "trp_aaaaaaaaaaaaaaaaaaaaaaaaaa", "amount": 100, "currency": "usd", "payment_method": "pm_card_visa"}})
		ExpectProblem(res, http.StatusUnprocessableEntity, "idempotency_key_reused")
	})
})

var _ = ForEachEngine("Request bodies at the transport", func(h *Harness) {
	It("answers a body over 1 MiB with 413 body_too_large", func() {
		city := h.NewCity(CityOpts{})
		rider := h.NewRider()
		body := estimateBody(city, "economy")
		body["origin"].(map[string]any)["address"] = strings.Repeat("x", 1<<20+1)
		res := h.Do(Request{Method: http.MethodPost, Path: "/v1/fare-estimates", Key: h.Key(auth.RoleRider, rider.ID), Body: body})
		ExpectProblem(res, http.StatusRequestEntityTooLarge, "body_too_large")
	})

	It("answers a body that is not JSON with 415, and malformed JSON with 400 malformed_json", func() {
		rider := h.NewRider()
		key := h.Key(auth.RoleRider, rider.ID)
		res := h.Do(Request{Method: http.MethodPost, Path: "/v1/fare-estimates", Key: key, Body: "origin=here",
			Header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}})
		ExpectProblem(res, http.StatusUnsupportedMediaType, "unsupported_media_type")
		res = h.Do(Request{Method: http.MethodPost, Path: "/v1/fare-estimates", Key: key, Body: `{"origin": {`})
		ExpectProblem(res, http.StatusBadRequest, "malformed_json")
	})
})
