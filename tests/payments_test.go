package tests

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server"
	"github.com/rideapi/ride/server/app"
	"github.com/rideapi/ride/server/auth"
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
	return h.newPayableIn(auth.DefaultAccount, status)
}

// newPayableIn is newPayable with a rider (so a trip) of the account.
func (h *Harness) newPayableIn(account, status string) payable {
	GinkgoHelper()
	driver := h.NewDriver(DriverOpts{})
	rider := h.NewRiderIn(account)
	trip := h.NewTrip(TripOpts{Driver: driver, Rider: rider, Status: status, Fare: 2358})
	return payable{
		trip: trip, rider: rider, driver: driver,
		riderKey: h.KeyIn(auth.RoleRider, rider.ID, account), driverKey: h.Key(auth.RoleDriver, driver.ID),
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

	It("stops replaying an answer to the key that asked for it once that key is revoked", func() {
		p := h.newPayable("completed")
		res := h.Do(Request{Method: http.MethodPost, Path: "/v1/api-keys", Key: h.Admin, Body: map[string]any{"role": "admin"}})
		Expect(res.Status).To(Equal(http.StatusCreated), "%s", res.Body)
		secret, id := res.JSON()["secret"].(string), res.JSON()["id"].(string)
		key, body := newIdempotencyKey(), paymentOf(p.trip, "pm_card_visa")
		Expect(h.pay(secret, key, body).Status).To(Equal(http.StatusCreated))
		Expect(h.pay(secret, key, body).Header.Get("Idempotent-Replayed")).To(Equal("true"))

		Expect(h.Do(Request{Method: http.MethodDelete, Path: "/v1/api-keys/" + id, Key: h.Admin}).Status).To(Equal(http.StatusNoContent))
		ExpectProblem(h.pay(secret, key, body), http.StatusUnauthorized, "unauthenticated")
	})

	It("pays a trip once when 12 payments with different keys race: one 201, the rest 409 trip_already_paid, one charge", func() {
		p := h.newPayable("completed")
		// The provider is asked once: the others wait for the trip's lock and then find it
		// paid. The unique index on succeeded payments would turn a second charge into a 409
		// as well, so only the provider's count tells the two apart.
		var charges atomic.Int32
		h.SetProvider(ProviderFunc(func(ctx context.Context, c app.Charge) (app.ChargeResult, error) {
			charges.Add(1)
			return app.SimulatedProvider{}.Charge(ctx, c)
		}))
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
		Expect(charges.Load()).To(Equal(int32(1)))
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
		adminA := h.KeyIn(auth.RoleAdmin, "", accountA)
		adminB := h.KeyIn(auth.RoleAdmin, "", accountB)

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
				`{"trip_id":"` + p.trip.ID + `","amount":2358,"currency":"usd","payment_method":"pm_card_visa","x":1}`: "body.x",
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
			other := h.Key(auth.RoleRider, h.NewRider().ID)
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
			Expect(h.GET(path, h.Key(auth.RoleRider, h.NewRider().ID)).Status).To(Equal(403))
			Expect(h.GET("/v1/trips/"+ride.NewID(ride.PrefixTrip)+"/payment", h.Admin).Status).To(Equal(404))
			Expect(h.GET("/v1/trips/nope/payment", h.Admin).Status).To(Equal(404))
		})

		It("ignores Idempotency-Key on GET", func() {
			p := h.newPayable("completed")
			key := newIdempotencyKey()
			res := h.Do(Request{Method: http.MethodGet, Path: "/v1/trips/" + p.trip.ID, Key: p.riderKey,
				Header: map[string]string{"Idempotency-Key": key}})
			Expect(res.Status).To(Equal(200))
			_, err := h.Store.IdempotencyRecordByKey(context.Background(), auth.DefaultAccount, key)
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
		_, err = h.Store.IdempotencyRecordByKey(ctx, auth.DefaultAccount, key)
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
			Account: auth.DefaultAccount, Key: freshKey, Fingerprint: "fp", Method: "POST", Path: "/v1/payments",
			Owner: "o", Now: later.Add(-time.Hour), StaleBefore: later.Add(-time.Minute),
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(claimed).To(BeTrue())

		srv, err := server.New(testDefaults(server.Config{IdempotencyTTL: 48 * time.Hour}),
			server.Deps{Store: h.Store, Now: func() time.Time { return later }})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(srv.Close)
		Eventually(func() error {
			_, err := h.Store.IdempotencyRecordByKey(ctx, auth.DefaultAccount, key)
			return err
		}).WithTimeout(10 * time.Second).Should(MatchError(store.ErrNotFound))
		Expect(srv.Close()).To(Succeed())
		_, err = h.Store.IdempotencyRecordByKey(ctx, auth.DefaultAccount, freshKey)
		Expect(err).NotTo(HaveOccurred())
	})
})
