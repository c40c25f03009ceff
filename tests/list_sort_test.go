package tests

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// sortedList is one list other than trips, with three items of an account of its own.
type sortedList struct {
	path string // with its query so far, ending in ? or &
	key  string
	// timeMember is the member `created_at` sorts by.
	timeMember string
	count      int
}

// listItem is an item's place in a list: its time and its id.
type listItem struct {
	at time.Time
	id string
}

// walkList follows next_cursor from the first page of path (limit 2) to the end.
func walkList(h *Harness, l sortedList, query string) []listItem {
	GinkgoHelper()
	var items []listItem
	cursor := ""
	for pages := 0; ; pages++ {
		Expect(pages).To(BeNumerically("<", 50), "walk does not end")
		path := l.path + "limit=2" + query
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		page := listPage(h, l, path)
		items = append(items, page.items...)
		if page.Pagination.NextCursor == nil {
			Expect(page.Pagination.HasMore).To(BeFalse())
			return items
		}
		Expect(page.Pagination.HasMore).To(BeTrue())
		cursor = *page.Pagination.NextCursor
	}
}

type listAnswer struct {
	items      []listItem
	Pagination gen.Pagination
}

func listPage(h *Harness, l sortedList, path string) listAnswer {
	GinkgoHelper()
	res := h.GET(path, l.key)
	Expect(res.Status).To(Equal(http.StatusOK), "%s: %s", path, res.Body)
	var page struct {
		Data       []map[string]any `json:"data"`
		Pagination gen.Pagination   `json:"pagination"`
	}
	res.Decode(&page)
	Expect(page.Pagination.Count).To(BeEquivalentTo(len(page.Data)))
	out := listAnswer{Pagination: page.Pagination}
	for _, item := range page.Data {
		at, err := time.Parse(time.RFC3339Nano, item[l.timeMember].(string))
		Expect(err).NotTo(HaveOccurred())
		out.items = append(out.items, listItem{at: at, id: item["id"].(string)})
	}
	return out
}

// Every list takes `sort` with the trips' syntax and errors: `created_at` (oldest first) and
// `-created_at` (newest first, the default), the id breaking ties in the same direction, and
// cursors bound to the sort they were issued for.
var _ = ForEachEngine("Sorting every list", func(h *Harness) {
	lists := map[string]sortedList{}

	BeforeEach(func(ctx SpecContext) {
		account := newAccount("sort")
		admin := h.KeyIn(auth.RoleAdmin, "", account)
		t0 := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
		// Three instants, two of them equal, so that the id breaks a tie.
		times := []time.Time{t0, t0.Add(time.Second), t0.Add(time.Second)}

		h.KeyIn(auth.RoleAdmin, "", account)
		h.KeyIn(auth.RoleAdmin, "", account)
		// The receipts' trip below brings a rider's key: four keys.
		lists["api keys"] = sortedList{path: "/v1/api-keys?", key: admin, timeMember: "created_at", count: 4}

		for i := range 3 {
			res := h.Do(Request{Method: http.MethodPost, Path: "/v1/webhook-endpoints", Key: admin,
				Body: map[string]any{"url": "https://partner.example.com/hooks/" + string(rune('a'+i)), "events": []string{"payment.failed"}}})
			Expect(res.Status).To(Equal(http.StatusCreated), "%s", res.Body)
		}
		receiver := NewReceiver(nil)
		res := h.Do(Request{Method: http.MethodPost, Path: "/v1/webhook-endpoints", Key: admin,
			Body: map[string]any{"url": receiver.URL + "/hooks", "events": []string{"trip.completed"}}})
		Expect(res.Status).To(Equal(http.StatusCreated), "%s", res.Body)
		endpoint := res.JSON()["id"].(string)
		lists["webhook endpoints"] = sortedList{path: "/v1/webhook-endpoints?", key: admin, timeMember: "created_at", count: 4}
		lists["webhook endpoints (deprecated alias)"] = sortedList{path: "/v1/webhook_endpoints?", key: admin, timeMember: "created_at", count: 4}

		for _, at := range times {
			e := newEvent("trip.completed", at)
			e.Account = account
			_, err := h.Store.AppendEvent(ctx, e)
			Expect(err).NotTo(HaveOccurred())
		}
		lists["events"] = sortedList{path: "/v1/events?", key: admin, timeMember: "created_at", count: 3}
		deliveries := sortedList{path: "/v1/webhook-endpoints/" + endpoint + "/deliveries?", key: admin, timeMember: "attempted_at", count: 3}
		Eventually(func() []listItem { return listPage(h, deliveries, deliveries.path+"limit=100").items }).
			WithTimeout(firstAttemptWithin).WithPolling(pollEvery).Should(HaveLen(3))
		lists["deliveries"] = deliveries

		payable := h.newPayableIn(account, "completed")
		for _, at := range times {
			p, err := h.Store.CreatePayment(ctx, store.Payment{ID: ride.NewID(ride.PrefixPayment), TripID: payable.trip.ID,
				Amount: payable.trip.FareTotal, Currency: payable.trip.FareCurrency, Status: "failed", CreatedAt: at})
			Expect(err).NotTo(HaveOccurred())
			_, err = h.Store.CreateReceipt(ctx, store.Receipt{ID: ride.NewID(ride.PrefixReceipt), TripID: payable.trip.ID,
				PaymentID: p.ID, Amount: p.Amount, Currency: p.Currency, LineItems: `[{"kind":"base_fare","amount":` + strconv.FormatInt(p.Amount, 10) + `}]`, IssuedAt: at})
			Expect(err).NotTo(HaveOccurred())
		}
		lists["receipts"] = sortedList{path: "/v1/receipts?trip_id=" + payable.trip.ID + "&", key: admin, timeMember: "issued_at", count: 3}
	})

	names := []string{"api keys", "webhook endpoints", "webhook endpoints (deprecated alias)", "events", "deliveries", "receipts"}
	entries := func() []TableEntry {
		var out []TableEntry
		for _, n := range names {
			out = append(out, Entry(n, n))
		}
		return out
	}

	DescribeTable("walks oldest first with created_at and newest first with -created_at, the default",
		func(name string) {
			l := lists[name]
			oldest := walkList(h, l, "&sort=created_at")
			newest := walkList(h, l, "&sort=-created_at")
			Expect(oldest).To(HaveLen(l.count))
			Expect(slices.IsSortedFunc(oldest, func(a, b listItem) int {
				if c := a.at.Compare(b.at); c != 0 {
					return c
				}
				return strings.Compare(a.id, b.id)
			})).To(BeTrue(), "%v", oldest)
			Expect(newest).To(Equal(reversed(oldest)))
			Expect(walkList(h, l, "")).To(Equal(newest))
		},
		entries(),
	)

	DescribeTable("goes back with prev_cursor in the sort's order",
		func(name string) {
			l := lists[name]
			first := listPage(h, l, l.path+"limit=2&sort=created_at")
			Expect(first.Pagination.PrevCursor).To(BeNil())
			second := listPage(h, l, l.path+"limit=2&sort=created_at&cursor="+url.QueryEscape(*first.Pagination.NextCursor))
			Expect(second.items).NotTo(BeEmpty())
			Expect(second.items[0].at).NotTo(BeTemporally("<", first.items[1].at))
			back := listPage(h, l, l.path+"limit=2&sort=created_at&cursor="+url.QueryEscape(*second.Pagination.PrevCursor))
			Expect(back.items).To(Equal(first.items))
			Expect(back.Pagination.PrevCursor).To(BeNil())
			Expect(back.Pagination.HasMore).To(BeTrue())
		},
		entries(),
	)

	DescribeTable("binds a cursor to its sort",
		func(name string) {
			l := lists[name]
			first := listPage(h, l, l.path+"limit=2&sort=created_at")
			cursor := url.QueryEscape(*first.Pagination.NextCursor)
			for _, other := range []string{"&sort=-created_at", ""} {
				res := h.GET(l.path+"limit=2&cursor="+cursor+other, l.key)
				Expect(res.Status).To(Equal(http.StatusBadRequest), "%s", res.Body)
				Expect(res.Problem().Code).To(Equal("invalid_cursor"))
			}
			res := h.GET(l.path+"limit=2&sort=created_at&cursor="+cursor, l.key)
			Expect(res.Status).To(Equal(http.StatusOK), "%s", res.Body)
		},
		entries(),
	)

	DescribeTable("refuses what the trips' sort refuses, naming query.sort",
		func(name string) {
			l := lists[name]
			for _, bad := range []string{"sort=name", "sort=id", "sort=created_at,-created_at", "sort=", "sort=-"} {
				res := h.GET(l.path+bad, l.key)
				Expect(res.Status).To(Equal(http.StatusBadRequest), "%s: %s", bad, res.Body)
				p := res.Problem()
				Expect(p.Code).To(Equal("invalid_request"), bad)
				Expect(p.Errors).NotTo(BeNil())
				Expect(*p.Errors).To(ContainElement(HaveField("Location", "query.sort")), bad)
			}
		},
		entries(),
	)
})

func reversed[T any](s []T) []T {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}
