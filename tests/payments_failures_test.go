package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/rideapi/ride/server/app"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/pipeline"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/store/storetest"
)

// What a payment leaves behind when a step fails after it was written, or the provider says no.
var _ = ForEachEngine("Paying for a trip when a step fails", func(h *Harness) {
	Context("when the request fails after the payment was written", func() {
		It("commits nothing, answers 500, and lets the same key succeed once on retry", func() {
			p := h.newPayable("completed")
			key := newIdempotencyKey()
			body := paymentOf(p.trip, "pm_card_visa")
			failures := 0
			h.SetFault(func(_ context.Context, point, subject string) error {
				if point == "payment.recorded" && subject == p.trip.ID && failures < 2 {
					failures++
					if failures == 2 {
						panic("injected panic after the payment was written")
					}
					return errors.New("injected failure after the payment was written")
				}
				return nil
			})
			for range 2 { // an error, then a panic
				res := h.pay(p.riderKey, key, body)
				Expect(res.Status).To(Equal(500), "%s", res.Body)
				Expect(res.Problem().Code).To(Equal("internal"))
				Expect(string(res.Body)).NotTo(ContainSubstring("injected"))
				Expect(h.recordsOf(p.trip.ID).nothing()).To(BeTrue(), "no payment, receipt or event")
				Expect(h.GET("/v1/trips/"+p.trip.ID+"/payment", p.riderKey).Status).To(Equal(404))
			}

			retry := h.pay(p.riderKey, key, body)
			Expect(retry.Status).To(Equal(201), "%s", retry.Body)
			Expect(retry.Header.Get("Idempotent-Replayed")).To(BeEmpty())
			replay := h.pay(p.riderKey, key, body)
			Expect(replay.Body).To(Equal(retry.Body))
			Expect(replay.Header.Get("Idempotent-Replayed")).To(Equal("true"))
			r := h.recordsOf(p.trip.ID)
			Expect(r.payments).To(HaveLen(1))
			Expect(r.receipts).To(HaveLen(1))
			Expect(r.events[ride.EventPaymentSucceeded]).To(HaveLen(1))
		})

		It("finishes a payment whose client went away, and replays its answer to the retry", func() {
			p := h.newPayable("completed")
			key := newIdempotencyKey()
			body := paymentOf(p.trip, "pm_card_visa")
			sawGone := make(chan bool, 1)
			recorded := make(chan struct{})
			h.SetFault(func(ctx context.Context, point, subject string) error {
				if point == "payment.recorded" && subject == p.trip.ID {
					// The payment is written: the client gives up now; hold the request until
					// the server sees its client gone, then let it finish.
					close(recorded)
					select {
					case <-pipeline.ClientGone(ctx):
						sawGone <- true
					case <-time.After(10 * time.Second):
						sawGone <- false
					}
				}
				return nil
			})
			raw, err := json.Marshal(body)
			Expect(err).NotTo(HaveOccurred())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				<-recorded
				cancel()
			}()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL+"/v1/payments", bytes.NewReader(raw))
			Expect(err).NotTo(HaveOccurred())
			req.Header.Set("Authorization", "Bearer "+p.riderKey)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", key)
			_, err = http.DefaultClient.Do(req)
			Expect(err).To(MatchError(context.Canceled), "the client gives up while the payment is held")
			Expect(<-sawGone).To(BeTrue(), "the server saw the client go while the payment was held")

			// The server commits what it began: the payment, once, and its answer for the key.
			Eventually(func() []store.Payment { return h.recordsOf(p.trip.ID).payments }).
				WithTimeout(5 * time.Second).Should(HaveLen(1))
			replay := h.pay(p.riderKey, key, body)
			Expect(replay.Status).To(Equal(201), "%s", replay.Body)
			Expect(replay.Header.Get("Idempotent-Replayed")).To(Equal("true"), "the retry gets the stored answer")
			Expect(h.recordsOf(p.trip.ID).payments).To(HaveLen(1))
		})

		It("answers 502 when the provider fails, records nothing and lets the key be retried", func() {
			p := h.newPayable("completed")
			key := newIdempotencyKey()
			var charges []app.Charge
			h.SetProvider(ProviderFunc(func(ctx context.Context, c app.Charge) (app.ChargeResult, error) {
				charges = append(charges, c)
				if len(charges) == 1 {
					return app.ChargeResult{}, errors.New("connection reset by provider")
				}
				return app.SimulatedProvider{}.Charge(ctx, c)
			}))
			res := h.pay(p.riderKey, key, paymentOf(p.trip, "pm_card_visa"))
			Expect(res.Status).To(Equal(502))
			Expect(res.Problem().Code).To(Equal("payment_provider_error"))
			Expect(h.recordsOf(p.trip.ID).nothing()).To(BeTrue())

			Expect(h.pay(p.riderKey, key, paymentOf(p.trip, "pm_card_visa")).Status).To(Equal(201))
			Expect(charges).To(HaveLen(2))
			Expect(charges[1].IdempotencyKey).To(Equal(charges[0].IdempotencyKey),
				"the provider sees the same key, so a charge it did make is not made twice")
			Expect(charges[0].Method).To(Equal("pm_card_visa"))
		})

		It("frees the key of a crashed attempt once its lease has run out, not before", func() {
			p := h.newPayable("completed")
			key := newIdempotencyKey()
			body := paymentOf(p.trip, "pm_card_visa")
			h.SetFault(func(_ context.Context, point, subject string) error {
				if subject == p.trip.ID {
					return errors.New("injected")
				}
				return nil
			})
			Expect(h.pay(p.riderKey, key, body).Status).To(Equal(500))
			h.faults.Store(nil)

			// Make the record look like an attempt that crashed mid-request: still pending.
			crashed := func(ago time.Duration) {
				Expect(storetest.SetIdempotencyRecordPending(context.Background(), h.Store,
					auth.DefaultAccount, key, "dead-process", time.Now().Add(-ago))).To(Succeed())
			}
			crashed(10 * time.Second)
			res := h.pay(p.riderKey, key, body)
			Expect(res.Status).To(Equal(409))
			Expect(res.Problem().Code).To(Equal("idempotency_key_in_use"))

			crashed(2 * time.Minute)
			res = h.pay(p.riderKey, key, body)
			Expect(res.Status).To(Equal(201), "%s", res.Body)
			Expect(h.recordsOf(p.trip.ID).payments).To(HaveLen(1))
		})
	})

	Context("when the provider declines", func() {
		It("records a failed payment, emits payment.failed, answers 422, and replays that answer", func() {
			p := h.newPayable("completed")
			key := newIdempotencyKey()
			body := paymentOf(p.trip, "pm_card_declined")
			res := h.pay(p.riderKey, key, body)
			Expect(res.Status).To(Equal(422), "%s", res.Body)
			problem := res.Problem()
			Expect(problem.Code).To(Equal("payment_declined"))
			Expect(problem.FailureCode).To(HaveValue(Equal("card_declined")))

			r := h.recordsOf(p.trip.ID)
			Expect(r.payments).To(HaveLen(1))
			Expect(r.payments[0].Status).To(Equal(store.PaymentFailed))
			Expect(r.payments[0].FailureCode).To(HaveValue(Equal("card_declined")))
			Expect(r.receipts).To(BeEmpty())
			Expect(r.events[ride.EventPaymentFailed]).To(HaveLen(1))
			Expect(r.events[ride.EventPaymentFailed][0].Data).To(MatchJSON(fmt.Sprintf(
				`{"payment_id":%q,"trip_id":%q,"amount":2358,"currency":"usd","status":"failed","failure_code":"card_declined"}`,
				r.payments[0].ID, p.trip.ID)))
			Expect(r.events[ride.EventPaymentFailed][0].Data).NotTo(ContainSubstring("pm_card"))

			again := h.pay(p.riderKey, key, body)
			Expect(again.Status).To(Equal(422))
			Expect(again.Body).To(Equal(res.Body), "the stored answer, byte for byte")
			Expect(again.Header.Get("Idempotent-Replayed")).To(Equal("true"))
			Expect(h.recordsOf(p.trip.ID).payments).To(HaveLen(1), "the replay charged nothing")

			// The trip is still unpaid: a new key and another card pay it.
			Expect(h.GET("/v1/trips/"+p.trip.ID+"/payment", p.riderKey).Status).To(Equal(404))
			Expect(h.pay(p.riderKey, newIdempotencyKey(), paymentOf(p.trip, "pm_card_visa")).Status).To(Equal(201))
			Expect(h.GET("/v1/trips/"+p.trip.ID+"/payment", p.riderKey).Status).To(Equal(200))
		})

		DescribeTable("names the reason of each test method",
			func(method, failureCode string) {
				p := h.newPayable("completed")
				res := h.pay(p.riderKey, newIdempotencyKey(), paymentOf(p.trip, method))
				Expect(res.Status).To(Equal(422))
				Expect(res.Problem().Code).To(Equal("payment_declined"))
				Expect(res.Problem().FailureCode).To(HaveValue(Equal(failureCode)))
				Expect(string(res.Body)).NotTo(ContainSubstring(method), "the method is never echoed")
			},
			Entry(nil, "pm_card_declined", "card_declined"),
			Entry(nil, "pm_card_insufficient_funds", "insufficient_funds"),
			Entry(nil, "pm_card_expired", "expired_card"),
			Entry(nil, "pm_card_unknown_thing", "invalid_payment_method"),
		)

		It("accepts every succeeding test method", func() {
			for _, method := range []string{"pm_card_visa", "pm_card_mastercard", "pm_card_amex"} {
				p := h.newPayable("completed")
				Expect(h.pay(p.riderKey, newIdempotencyKey(), paymentOf(p.trip, method)).Status).To(Equal(201), method)
			}
		})
	})

})
