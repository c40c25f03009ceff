package tests

import (
	"context"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

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
		for _, key := range []string{p.driverKey, h.Key(auth.RoleRider, h.NewRider().ID)} {
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
