package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// payable is a completed trip with its people and keys.
type payable struct {
	trip      store.Trip
	rider     store.Rider
	driver    store.Driver
	riderKey  string
	driverKey string
}

func (h *Harness) newPayable(status string) payable {
	GinkgoHelper()
	return h.newPayableIn(server.DefaultAccount, status)
}

// newPayableIn is newPayable with a rider (so a trip) of the account.
func (h *Harness) newPayableIn(account, status string) payable {
	GinkgoHelper()
	driver := h.NewDriver(DriverOpts{})
	rider := h.NewRiderIn(account)
	trip := h.NewTrip(TripOpts{Driver: driver, Rider: rider, Status: status, Fare: 2358})
	return payable{
		trip: trip, rider: rider, driver: driver,
		riderKey: h.KeyIn(server.RoleRider, rider.ID, account), driverKey: h.Key(server.RoleDriver, driver.ID),
	}
}

// paymentOf is the body that pays trip's fare with method.
func paymentOf(trip store.Trip, method string) map[string]any {
	return map[string]any{"trip_id": trip.ID, "amount": trip.FareTotal, "currency": trip.FareCurrency, "payment_method": method}
}

// pay posts a payment; an empty idempotency key sends none.
func (h *Harness) pay(apiKey, idempotencyKey string, body any) *Response {
	GinkgoHelper()
	header := map[string]string{}
	if idempotencyKey != "" {
		header["Idempotency-Key"] = idempotencyKey
	}
	return h.Do(Request{Method: http.MethodPost, Path: "/v1/payments", Key: apiKey, Body: body, Header: header})
}

// tripRecords is everything a payment of a trip may have written.
type tripRecords struct {
	payments []store.Payment
	receipts []store.Receipt
	events   map[string][]store.Event // by type
}

func (h *Harness) recordsOf(tripID string) tripRecords {
	GinkgoHelper()
	ctx := context.Background()
	payments, err := h.Store.PaymentsForTrip(ctx, tripID)
	Expect(err).NotTo(HaveOccurred())
	page, err := h.Store.ListReceipts(ctx, store.ReceiptListParams{TripID: tripID, Limit: 100})
	Expect(err).NotTo(HaveOccurred())
	events, err := h.Store.EventsBySubject(ctx, tripID)
	Expect(err).NotTo(HaveOccurred())
	r := tripRecords{payments: payments, receipts: page.Receipts, events: map[string][]store.Event{}}
	for _, e := range events {
		r.events[e.Type] = append(r.events[e.Type], e)
	}
	return r
}

func (r tripRecords) nothing() bool {
	return len(r.payments) == 0 && len(r.receipts) == 0 && len(r.events) == 0
}

var _ = ForEachEngine("Paying for a trip", func(h *Harness) {
	It("charges a completed trip once: 201, Location, a receipt and payment.succeeded, all in one go", func() {
		p := h.newPayable("completed")
		before := time.Now().UTC()
		res := h.pay(p.riderKey, newIdempotencyKey(), paymentOf(p.trip, "pm_card_visa"))
		Expect(res.Status).To(Equal(201), "%s", res.Body)
		Expect(res.Header.Get("Location")).To(Equal("/v1/trips/" + p.trip.ID + "/payment"))
		Expect(res.Header.Get("Idempotent-Replayed")).To(BeEmpty())
		var payment gen.Payment
		res.Decode(&payment)
		Expect(ride.ValidID(ride.PrefixPayment, payment.Id)).To(BeTrue(), payment.Id)
		Expect(payment).To(Equal(gen.Payment{Id: payment.Id, TripId: p.trip.ID, Amount: 2358, Currency: "usd",
			Status: gen.PaymentStatus("succeeded"), CreatedAt: payment.CreatedAt}))
		Expect(payment.CreatedAt).To(BeTemporally(">=", before.Truncate(time.Microsecond)))
		Expect(res.JSON()).NotTo(HaveKey("payment_method"))

		got := h.GET(res.Header.Get("Location"), p.riderKey)
		Expect(got.Status).To(Equal(200))
		Expect(got.Body).To(MatchJSON(res.Body))
		Expect(got.Header.Get("ETag")).NotTo(BeEmpty())

		r := h.recordsOf(p.trip.ID)
		Expect(r.payments).To(HaveLen(1))
		Expect(r.payments[0].PaymentMethod).To(Equal("pm_card_visa"), "stored, though never shown")
		Expect(r.receipts).To(HaveLen(1))
		Expect(r.receipts[0].PaymentID).To(Equal(payment.Id))
		Expect(r.events[ride.EventPaymentSucceeded]).To(HaveLen(1))
		Expect(r.events[ride.EventPaymentSucceeded][0].Data).To(MatchJSON(fmt.Sprintf(
			`{"payment_id":%q,"trip_id":%q,"amount":2358,"currency":"usd","status":"succeeded"}`, payment.Id, p.trip.ID)))
	})

	It("replays the same request byte for byte with Idempotent-Replayed, whatever the JSON spelling", func() {
		p := h.newPayable("completed")
		key := newIdempotencyKey()
		first := h.pay(p.riderKey, key, paymentOf(p.trip, "pm_card_visa"))
		Expect(first.Status).To(Equal(201))

		// The same document, members reordered and spaced out: the same request.
		respelt := fmt.Sprintf(`{ "payment_method" : "pm_card_visa", "currency":"usd",
			"amount": 2358, "trip_id": %q }`, p.trip.ID)
		for _, body := range []any{paymentOf(p.trip, "pm_card_visa"), respelt} {
			again := h.pay(p.riderKey, key, body)
			Expect(again.Status).To(Equal(201))
			Expect(again.Body).To(Equal(first.Body), "byte for byte")
			Expect(again.Header.Get("Idempotent-Replayed")).To(Equal("true"))
			Expect(again.Header.Get("Location")).To(Equal(first.Header.Get("Location")))
			Expect(again.Header.Get("Content-Type")).To(Equal(first.Header.Get("Content-Type")))
			Expect(again.Header.Get("X-Request-Id")).NotTo(Equal(first.Header.Get("X-Request-Id")))
		}
		Expect(h.recordsOf(p.trip.ID).payments).To(HaveLen(1))
	})

	It("pays a trip once when 12 payments with different keys race: one 201, the rest 409 trip_already_paid", func() {
		p := h.newPayable("completed")
		body := paymentOf(p.trip, "pm_card_visa")
		const n = 12
		responses := make([]*Response, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				defer GinkgoRecover()
				<-start
				responses[i] = h.pay(p.riderKey, newIdempotencyKey(), body)
			})
		}
		close(start)
		wg.Wait()
		created := 0
		for _, res := range responses {
			switch res.Status {
			case http.StatusCreated:
				created++
			case http.StatusConflict:
				Expect(res.Problem().Code).To(Equal("trip_already_paid"), "%s", res.Body)
			default:
				Fail(fmt.Sprintf("unexpected answer %d %s", res.Status, res.Body))
			}
		}
		Expect(created).To(Equal(1))
		r := h.recordsOf(p.trip.ID)
		Expect(r.payments).To(HaveLen(1))
		Expect(r.receipts).To(HaveLen(1))
		Expect(r.events[ride.EventPaymentSucceeded]).To(HaveLen(1))
	})

	It("runs 30 concurrent identical requests once: one payment, one receipt, one event, the rest replay or 409", func() {
		p := h.newPayable("completed")
		key := newIdempotencyKey()
		body := paymentOf(p.trip, "pm_card_visa")
		const n = 30
		responses := make([]*Response, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				defer GinkgoRecover()
				<-start
				responses[i] = h.pay(p.riderKey, key, body)
			})
		}
		close(start)
		wg.Wait()

		var original *Response
		var replays, inUse int
		for _, res := range responses {
			switch {
			case res.Status == 201 && res.Header.Get("Idempotent-Replayed") == "":
				Expect(original).To(BeNil(), "one original answer")
				original = res
			case res.Status == 201:
				replays++
			case res.Status == 409:
				Expect(res.Problem().Code).To(Equal("idempotency_key_in_use"))
				Expect(res.Header.Get("Retry-After")).To(Equal("1"))
				inUse++
			default:
				Fail(fmt.Sprintf("unexpected answer %d %s", res.Status, res.Body))
			}
		}
		Expect(original).NotTo(BeNil())
		for _, res := range responses {
			if res.Status == 201 {
				Expect(res.Body).To(Equal(original.Body))
			}
		}
		r := h.recordsOf(p.trip.ID)
		Expect(r.payments).To(HaveLen(1))
		Expect(r.receipts).To(HaveLen(1))
		Expect(r.events[ride.EventPaymentSucceeded]).To(HaveLen(1))
		Expect(r.events).To(HaveLen(1))

		split := fmt.Sprintf("%s: 1 original, %d replays, %d idempotency_key_in_use, 0 other", h.Engine, replays, inUse)
		AddReportEntry("concurrent payments", split)
		fmt.Fprintln(GinkgoWriter, split)
	})

	It("refuses the key with another body, and with another caller", func() {
		p := h.newPayable("completed")
		key := newIdempotencyKey()
		Expect(h.pay(p.riderKey, key, paymentOf(p.trip, "pm_card_visa")).Status).To(Equal(201))

		for _, body := range []map[string]any{
			paymentOf(p.trip, "pm_card_mastercard"),
			{"trip_id": p.trip.ID, "amount": 2359, "currency": "usd", "payment_method": "pm_card_visa"},
			paymentOf(h.newPayable("completed").trip, "pm_card_visa"),
		} {
			res := h.pay(p.riderKey, key, body)
			Expect(res.Status).To(Equal(422), "%s", res.Body)
			Expect(res.Problem().Code).To(Equal("idempotency_key_reused"))
		}
		// An admin of the same account sending the very same request is another caller: it
		// must not be shown the rider's stored answer.
		res := h.pay(h.Admin, key, paymentOf(p.trip, "pm_card_visa"))
		Expect(res.Status).To(Equal(422))
		Expect(res.Problem().Code).To(Equal("idempotency_key_reused"))
	})

	It("keeps the keys of two accounts apart: the same key and request run twice, independently", func() {
		accountA := "acct_tenant_a_" + strings.ToLower(ride.NewID("x")[2:10])
		accountB := "acct_tenant_b_" + strings.ToLower(ride.NewID("x")[2:10])
		p := h.newPayableIn(accountA, "completed")
		key := newIdempotencyKey()
		body := paymentOf(p.trip, "pm_card_visa")
		adminA := h.KeyIn(server.RoleAdmin, "", accountA)
		adminB := h.KeyIn(server.RoleAdmin, "", accountB)

		first := h.pay(adminA, key, body)
		Expect(first.Status).To(Equal(201))
		// Same key, same caller role, same body: were keys not scoped by account, this would
		// replay the 201. It runs instead, and finds no such trip in account B.
		second := h.pay(adminB, key, body)
		Expect(second.Status).To(Equal(422), "%s", second.Body)
		Expect(second.Header.Get("Idempotent-Replayed")).To(BeEmpty())
		Expect(second.Problem().Code).To(Equal("trip_not_found"))
		Expect(h.pay(adminB, key, body).Header.Get("Idempotent-Replayed")).To(Equal("true"))
		Expect(h.pay(adminA, key, body).Status).To(Equal(201))

		// Two riders of two accounts, one key, two trips: two payments.
		accountC := "acct_tenant_c_" + strings.ToLower(ride.NewID("x")[2:10])
		accountD := "acct_tenant_d_" + strings.ToLower(ride.NewID("x")[2:10])
		q1, q2 := h.newPayableIn(accountC, "completed"), h.newPayableIn(accountD, "completed")
		r1, r2 := q1.riderKey, q2.riderKey
		a, b := h.pay(r1, key, paymentOf(q1.trip, "pm_card_visa")), h.pay(r2, key, paymentOf(q2.trip, "pm_card_visa"))
		Expect([]int{a.Status, b.Status}).To(Equal([]int{201, 201}))
		Expect(a.JSON()["id"]).NotTo(Equal(b.JSON()["id"]))
	})

	It("answers 409 idempotency_key_in_use while the first request runs, then its answer", func() {
		p := h.newPayable("completed")
		key := newIdempotencyKey()
		body := paymentOf(p.trip, "pm_card_visa")
		entered, release := make(chan struct{}), make(chan struct{})
		h.SetFault(func(_ context.Context, point, subject string) error {
			if subject == p.trip.ID {
				close(entered)
				<-release
			}
			return nil
		})
		done := make(chan *Response)
		go func() {
			defer GinkgoRecover()
			done <- h.pay(p.riderKey, key, body)
		}()
		Eventually(entered).WithTimeout(10 * time.Second).Should(BeClosed())

		res := h.pay(p.riderKey, key, body)
		Expect(res.Status).To(Equal(409))
		Expect(res.Problem().Code).To(Equal("idempotency_key_in_use"))
		Expect(res.Header.Get("Retry-After")).To(Equal("1"))
		// Another body is refused as such, even in flight.
		res = h.pay(p.riderKey, key, paymentOf(p.trip, "pm_card_amex"))
		Expect(res.Problem().Code).To(Equal("idempotency_key_reused"))

		close(release)
		var first *Response
		Eventually(done).WithTimeout(10 * time.Second).Should(Receive(&first))
		Expect(first.Status).To(Equal(201))
		again := h.pay(p.riderKey, key, body)
		Expect(again.Body).To(Equal(first.Body))
		Expect(again.Header.Get("Idempotent-Replayed")).To(Equal("true"))
	})

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
			h.SetFault(func(ctx context.Context, point, subject string) error {
				if point == "payment.recorded" && subject == p.trip.ID {
					// The payment is written: hold the request until the server sees its client
					// gone, then let it finish.
					select {
					case <-server.ClientGone(ctx):
						sawGone <- true
					case <-time.After(10 * time.Second):
						sawGone <- false
					}
				}
				return nil
			})
			raw, err := json.Marshal(body)
			Expect(err).NotTo(HaveOccurred())
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL+"/v1/payments", bytes.NewReader(raw))
			Expect(err).NotTo(HaveOccurred())
			req.Header.Set("Authorization", "Bearer "+p.riderKey)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", key)
			_, err = http.DefaultClient.Do(req)
			Expect(err).To(MatchError(context.DeadlineExceeded), "the client gives up while the payment is held")
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
			var charges []server.Charge
			h.SetProvider(ProviderFunc(func(ctx context.Context, c server.Charge) (server.ChargeResult, error) {
				charges = append(charges, c)
				if len(charges) == 1 {
					return server.ChargeResult{}, errors.New("connection reset by provider")
				}
				return server.SimulatedProvider{}.Charge(ctx, c)
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
				Expect(h.Store.DB().Model(&store.IdempotencyRecord{}).
					Where("account = ? AND idem_key = ?", server.DefaultAccount, key).
					Updates(map[string]any{"status": store.IdempotencyPending, "owner": "dead-process",
						"locked_at": time.Now().UTC().Add(-ago).Truncate(time.Microsecond)}).Error).To(Succeed())
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

	Context("refuses", func() {
		It("a trip that is not completed (409 trip_not_completed), for every other status", func() {
			for _, status := range []string{"accepted", "arriving", "in_progress", "cancelled"} {
				p := h.newPayable(status)
				res := h.pay(p.riderKey, newIdempotencyKey(), paymentOf(p.trip, "pm_card_visa"))
				Expect(res.Status).To(Equal(409), status)
				Expect(res.Problem().Code).To(Equal("trip_not_completed"))
				Expect(*res.Problem().Detail).To(ContainSubstring("this one is " + status))
				Expect(h.recordsOf(p.trip.ID).nothing()).To(BeTrue())
			}
		})

		It("a paid trip (409 trip_already_paid), with another key, whatever the amount", func() {
			p := h.newPayable("completed")
			Expect(h.pay(p.riderKey, newIdempotencyKey(), paymentOf(p.trip, "pm_card_visa")).Status).To(Equal(201))
			for _, body := range []map[string]any{
				paymentOf(p.trip, "pm_card_visa"),
				{"trip_id": p.trip.ID, "amount": 1, "currency": "eur", "payment_method": "pm_card_visa"},
			} {
				res := h.pay(p.riderKey, newIdempotencyKey(), body)
				Expect(res.Status).To(Equal(409))
				Expect(res.Problem().Code).To(Equal("trip_already_paid"))
			}
			Expect(h.recordsOf(p.trip.ID).payments).To(HaveLen(1))
		})

		It("an amount or currency other than the fare (422 amount_mismatch)", func() {
			p := h.newPayable("completed")
			for _, body := range []map[string]any{
				{"trip_id": p.trip.ID, "amount": 2357, "currency": "usd", "payment_method": "pm_card_visa"},
				{"trip_id": p.trip.ID, "amount": 2358, "currency": "eur", "payment_method": "pm_card_visa"},
			} {
				res := h.pay(p.riderKey, newIdempotencyKey(), body)
				Expect(res.Status).To(Equal(422))
				Expect(res.Problem().Code).To(Equal("amount_mismatch"))
				Expect(*res.Problem().Detail).To(ContainSubstring("2358 usd"))
			}
			Expect(h.recordsOf(p.trip.ID).nothing()).To(BeTrue())
		})

		It("an unknown trip (422 trip_not_found)", func() {
			p := h.newPayable("completed")
			for _, id := range []string{ride.NewID(ride.PrefixTrip), "trp_nope", strings.Repeat("x", 64)} {
				res := h.pay(p.riderKey, newIdempotencyKey(), map[string]any{
					"trip_id": id, "amount": 100, "currency": "usd", "payment_method": "pm_card_visa"})
				Expect(res.Status).To(Equal(422), id)
				Expect(res.Problem().Code).To(Equal("trip_not_found"))
			}
		})

		It("a request without Idempotency-Key (400 idempotency_key_required) or with a bad one (400 invalid_idempotency_key)", func() {
			p := h.newPayable("completed")
			res := h.pay(p.riderKey, "", paymentOf(p.trip, "pm_card_visa"))
			Expect(res.Status).To(Equal(400))
			Expect(res.Problem().Code).To(Equal("idempotency_key_required"))
			for _, bad := range []string{strings.Repeat("k", 256), "has space"} {
				res = h.pay(p.riderKey, bad, paymentOf(p.trip, "pm_card_visa"))
				Expect(res.Status).To(Equal(400))
				Expect(res.Problem().Code).To(Equal("invalid_idempotency_key"))
			}
			Expect(h.recordsOf(p.trip.ID).nothing()).To(BeTrue())
		})

		It("invalid bodies with 400 naming the member, and stores nothing against the key", func() {
			p := h.newPayable("completed")
			key := newIdempotencyKey()
			for body, location := range map[string]string{
				`{"trip_id":"` + p.trip.ID + `","amount":2358,"currency":"usd"}`:                                       "body.payment_method",
				`{"trip_id":"` + p.trip.ID + `","amount":2358,"currency":"USD","payment_method":"pm_card_visa"}`:       "body.currency",
				`{"trip_id":"` + p.trip.ID + `","amount":-1,"currency":"usd","payment_method":"pm_card_visa"}`:         "body.amount",
				`{"trip_id":"` + p.trip.ID + `","amount":2358,"currency":"usd","payment_method":"card"}`:               "body.payment_method",
				`{"trip_id":"` + p.trip.ID + `","amount":2358,"currency":"usd","payment_method":"pm_card_visa","x":1}`: "body",
			} {
				res := h.pay(p.riderKey, key, body)
				Expect(res.Status).To(Equal(400), body)
				Expect(res.Problem().Code).To(Equal("invalid_request"))
				Expect(*res.Problem().Errors).To(ContainElement(HaveField("Location", location)), body)
			}
			// Nothing was stored: the key still runs the valid request.
			Expect(h.pay(p.riderKey, key, paymentOf(p.trip, "pm_card_visa")).Status).To(Equal(201))
		})
	})

	Context("permissions", func() {
		It("answers 401 without a key on every payment operation", func() {
			p := h.newPayable("completed")
			Expect(h.pay("", newIdempotencyKey(), paymentOf(p.trip, "pm_card_visa")).Status).To(Equal(401))
			Expect(h.GET("/v1/trips/"+p.trip.ID+"/payment", "").Status).To(Equal(401))
			Expect(h.GET("/v1/receipts?trip_id="+p.trip.ID, "").Status).To(Equal(401))
			Expect(h.pay("rk_not-a-key", newIdempotencyKey(), paymentOf(p.trip, "pm_card_visa")).Status).To(Equal(401))
		})

		It("lets only the trip's rider or an admin pay (403 for its driver and other riders)", func() {
			p := h.newPayable("completed")
			other := h.Key(server.RoleRider, h.NewRider().ID)
			for _, key := range []string{p.driverKey, other} {
				res := h.pay(key, newIdempotencyKey(), paymentOf(p.trip, "pm_card_visa"))
				Expect(res.Status).To(Equal(403))
				Expect(res.Problem().Code).To(Equal("forbidden"))
			}
			Expect(h.recordsOf(p.trip.ID).nothing()).To(BeTrue())
			Expect(h.pay(h.Admin, newIdempotencyKey(), paymentOf(p.trip, "pm_card_visa")).Status).To(Equal(201))
		})

		It("shows a trip's payment to its rider and admins only", func() {
			p := h.newPayable("completed")
			path := "/v1/trips/" + p.trip.ID + "/payment"
			Expect(h.GET(path, p.riderKey).Status).To(Equal(404), "unpaid")
			Expect(h.pay(p.riderKey, newIdempotencyKey(), paymentOf(p.trip, "pm_card_visa")).Status).To(Equal(201))
			Expect(h.GET(path, p.riderKey).Status).To(Equal(200))
			Expect(h.GET(path, h.Admin).Status).To(Equal(200))
			Expect(h.GET(path, p.driverKey).Status).To(Equal(403))
			Expect(h.GET(path, h.Key(server.RoleRider, h.NewRider().ID)).Status).To(Equal(403))
			Expect(h.GET("/v1/trips/"+ride.NewID(ride.PrefixTrip)+"/payment", h.Admin).Status).To(Equal(404))
			Expect(h.GET("/v1/trips/nope/payment", h.Admin).Status).To(Equal(404))
		})

		It("ignores Idempotency-Key on GET", func() {
			p := h.newPayable("completed")
			key := newIdempotencyKey()
			res := h.Do(Request{Method: http.MethodGet, Path: "/v1/trips/" + p.trip.ID, Key: p.riderKey,
				Header: map[string]string{"Idempotency-Key": key}})
			Expect(res.Status).To(Equal(200))
			_, err := h.Store.IdempotencyRecordByKey(context.Background(), server.DefaultAccount, key)
			Expect(err).To(MatchError(store.ErrNotFound))
		})
	})

	It("keeps answers for the retention period, then forgets the key", func() {
		p := h.newPayable("completed")
		key := newIdempotencyKey()
		body := paymentOf(p.trip, "pm_card_visa")
		Expect(h.pay(p.riderKey, key, body).Status).To(Equal(201))
		ctx := context.Background()

		// A purge as of 23 hours from now keeps the record (24 h default retention).
		_, err := h.Store.PurgeIdempotencyRecords(ctx, time.Now().Add(23*time.Hour).Add(-server.DefaultIdempotencyTTL))
		Expect(err).NotTo(HaveOccurred())
		Expect(h.pay(p.riderKey, key, body).Header.Get("Idempotent-Replayed")).To(Equal("true"))

		// As of 25 hours from now it goes, and the key is new again: the request runs afresh
		// (and finds the trip paid) instead of replaying.
		_, err = h.Store.PurgeIdempotencyRecords(ctx, time.Now().Add(25*time.Hour).Add(-server.DefaultIdempotencyTTL))
		Expect(err).NotTo(HaveOccurred())
		_, err = h.Store.IdempotencyRecordByKey(ctx, server.DefaultAccount, key)
		Expect(err).To(MatchError(store.ErrNotFound))
		res := h.pay(p.riderKey, key, body)
		Expect(res.Status).To(Equal(409))
		Expect(res.Header.Get("Idempotent-Replayed")).To(BeEmpty())
		Expect(res.Problem().Code).To(Equal("trip_already_paid"))
	})

	It("purges expired records in the background while the server runs", func() {
		ctx := context.Background()
		p := h.newPayable("completed")
		key := newIdempotencyKey()
		Expect(h.pay(p.riderKey, key, paymentOf(p.trip, "pm_card_visa")).Status).To(Equal(201))

		// A second server on the same database whose clock reads 49 hours from now, with a 48 h
		// retention: its purge, which runs as it starts, removes the record made above and keeps
		// one made an hour before its "now".
		later := time.Now().Add(49 * time.Hour)
		freshKey := newIdempotencyKey()
		_, claimed, err := h.Store.ClaimIdempotencyKey(ctx, store.IdempotencyClaim{
			Account: server.DefaultAccount, Key: freshKey, Fingerprint: "fp", Method: "POST", Path: "/v1/payments",
			Owner: "o", Now: later.Add(-time.Hour), StaleBefore: later.Add(-time.Minute),
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(claimed).To(BeTrue())

		srv, err := server.New(testDefaults(server.Config{IdempotencyTTL: 48 * time.Hour}),
			server.Deps{Store: h.Store, Now: func() time.Time { return later }})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(srv.Close)
		Eventually(func() error {
			_, err := h.Store.IdempotencyRecordByKey(ctx, server.DefaultAccount, key)
			return err
		}).WithTimeout(10 * time.Second).Should(MatchError(store.ErrNotFound))
		Expect(srv.Close()).To(Succeed())
		_, err = h.Store.IdempotencyRecordByKey(ctx, server.DefaultAccount, freshKey)
		Expect(err).NotTo(HaveOccurred())
	})
})

var _ = ForEachEngine("Listing a trip's receipts", func(h *Harness) {
	var p payable
	var receipt gen.Receipt

	BeforeEach(func() {
		p = h.newPayable("completed")
		Expect(h.pay(p.riderKey, newIdempotencyKey(), paymentOf(p.trip, "pm_card_visa")).Status).To(Equal(201))
		res := h.GET("/v1/receipts?trip_id="+p.trip.ID, p.riderKey)
		Expect(res.Status).To(Equal(200))
		var list gen.ReceiptList
		res.Decode(&list)
		Expect(list.Data).To(HaveLen(1))
		Expect(list.Pagination).To(Equal(gen.Pagination{Count: 1}))
		receipt = list.Data[0]
	})

	It("issues a receipt whose line items add up to the amount paid", func() {
		Expect(ride.ValidID(ride.PrefixReceipt, receipt.Id)).To(BeTrue())
		Expect(receipt.TripId).To(Equal(p.trip.ID))
		Expect(receipt.Amount).To(BeEquivalentTo(2358))
		Expect(receipt.Currency).To(Equal("usd"))
		var sum int64
		var kinds []gen.ReceiptLineItemKind
		for _, l := range receipt.LineItems {
			sum += l.Amount
			kinds = append(kinds, l.Kind)
		}
		Expect(sum).To(Equal(receipt.Amount))
		Expect(kinds).To(Equal([]gen.ReceiptLineItemKind{"base_fare", "distance", "time"}))
		payment := h.GET("/v1/trips/"+p.trip.ID+"/payment", p.riderKey).JSON()
		Expect(receipt.PaymentId).To(Equal(payment["id"]))
		Expect(h.GET("/v1/receipts?trip_id="+p.trip.ID, h.Admin).Status).To(Equal(200))
	})

	It("pages by cursor, newest first, both ways, bound to its query", func() {
		// More receipts for the trip (as refunds or adjustments would issue), two sharing a time.
		payment, err := h.Store.SucceededPaymentForTrip(context.Background(), p.trip.ID)
		Expect(err).NotTo(HaveOccurred())
		base := receipt.IssuedAt
		for i := range 6 {
			_, err := h.Store.CreateReceipt(context.Background(), store.Receipt{
				ID: ride.NewID(ride.PrefixReceipt), TripID: p.trip.ID, PaymentID: payment.ID, Amount: 100, Currency: "usd",
				LineItems: `[{"kind":"base_fare","amount":100}]`, IssuedAt: base.Add(time.Duration(i/2+1) * time.Second),
			})
			Expect(err).NotTo(HaveOccurred())
		}
		all := receiptPage(h, p.riderKey, "/v1/receipts?limit=100&trip_id="+p.trip.ID)
		Expect(all.Data).To(HaveLen(7))
		Expect(all.Data[6].Id).To(Equal(receipt.Id), "the first receipt is the oldest")
		for i := 1; i < 7; i++ {
			a, b := all.Data[i-1], all.Data[i]
			Expect(a.IssuedAt.After(b.IssuedAt) || (a.IssuedAt.Equal(b.IssuedAt) && a.Id > b.Id)).To(BeTrue())
		}

		var walked []string
		var pages []gen.ReceiptList
		path := "/v1/receipts?limit=3&trip_id=" + p.trip.ID
		for cursor := ""; ; {
			page := receiptPage(h, p.riderKey, path+cursor)
			pages = append(pages, page)
			Expect(page.Pagination.Count).To(BeEquivalentTo(len(page.Data)))
			for _, r := range page.Data {
				walked = append(walked, r.Id)
			}
			if page.Pagination.NextCursor == nil {
				Expect(page.Pagination.HasMore).To(BeFalse())
				break
			}
			Expect(page.Pagination.HasMore).To(BeTrue())
			cursor = "&cursor=" + *page.Pagination.NextCursor
		}
		Expect(pages).To(HaveLen(3))
		ids := make([]string, len(all.Data))
		for i, r := range all.Data {
			ids[i] = r.Id
		}
		Expect(walked).To(Equal(ids))
		Expect(pages[0].Pagination.PrevCursor).To(BeNil())

		// prev_cursor of the second page returns the first page.
		back := receiptPage(h, p.riderKey, path+"&cursor="+*pages[1].Pagination.PrevCursor)
		Expect(back.Data).To(Equal(pages[0].Data))

		// The cursor is bound to the query and the caller.
		next := *pages[0].Pagination.NextCursor
		other := h.newPayable("completed")
		// Flip one character in the middle: it always changes the cursor, where overwriting its
		// tail with fixed characters leaves it as it was when it already ends in them.
		tampered := []byte(next)
		if mid := len(tampered) / 2; tampered[mid] == 'A' {
			tampered[mid] = 'B'
		} else {
			tampered[mid] = 'A'
		}
		for _, c := range []struct{ key, path string }{
			{h.Admin, path + "&cursor=" + next},
			{p.riderKey, "/v1/receipts?limit=3&trip_id=" + p.trip.ID + "&cursor=" + string(tampered)},
			{other.riderKey, "/v1/receipts?limit=3&trip_id=" + other.trip.ID + "&cursor=" + next},
			{p.riderKey, "/v1/trips?limit=3&cursor=" + next},
		} {
			res := h.GET(c.path, c.key)
			Expect(res.Status).To(Equal(400), c.path)
			Expect(res.Problem().Code).To(Equal("invalid_cursor"))
		}
		res := h.GET("/v1/receipts?limit=0&trip_id="+p.trip.ID, p.riderKey)
		Expect(res.Status).To(Equal(400))
		Expect(res.Problem().Code).To(Equal("invalid_limit"))
	})

	It("requires trip_id (400)", func() {
		res := h.GET("/v1/receipts", p.riderKey)
		Expect(res.Status).To(Equal(400))
		Expect(res.Problem().Code).To(Equal("invalid_request"))
		Expect(*res.Problem().Errors).To(ContainElement(HaveField("Location", "query.trip_id")))
	})

	It("refuses a trip the caller may not see (403), whether or not it exists; admins see an empty list", func() {
		for _, key := range []string{p.driverKey, h.Key(server.RoleRider, h.NewRider().ID)} {
			res := h.GET("/v1/receipts?trip_id="+p.trip.ID, key)
			Expect(res.Status).To(Equal(403))
			Expect(res.Problem().Code).To(Equal("forbidden"))
		}
		for _, id := range []string{ride.NewID(ride.PrefixTrip), "trp_nope"} {
			Expect(h.GET("/v1/receipts?trip_id="+id, p.riderKey).Status).To(Equal(403))
			empty := receiptPage(h, h.Admin, "/v1/receipts?trip_id="+id)
			Expect(empty.Data).To(BeEmpty())
			Expect(empty.Pagination).To(Equal(gen.Pagination{}))
		}
	})

	It("answers a conditional GET with 304", func() {
		path := "/v1/receipts?trip_id=" + p.trip.ID
		first := h.GET(path, p.riderKey)
		etag := first.Header.Get("ETag")
		Expect(etag).NotTo(BeEmpty())
		Expect(first.Header.Get("Vary")).To(Equal("Authorization"))
		res := h.Do(Request{Method: http.MethodGet, Path: path, Key: p.riderKey, Header: map[string]string{"If-None-Match": etag}})
		Expect(res.Status).To(Equal(304))
		Expect(res.Body).To(BeEmpty())
	})
})

func receiptPage(h *Harness, key, path string) gen.ReceiptList {
	GinkgoHelper()
	res := h.GET(path, key)
	Expect(res.Status).To(Equal(200), "%s", res.Body)
	var list gen.ReceiptList
	res.Decode(&list)
	return list
}
