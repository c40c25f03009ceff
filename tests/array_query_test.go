package tests

import (
	"net/http"
	"net/url"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/gen"
)

// Array query parameters (`sort`, `fields`) are comma-separated in the document, and what
// mainstream clients send for an array by default means the same: the name repeated
// (openapi-fetch, axios without brackets) or with brackets (axios and qs).
var _ = ForEachEngine("Array query parameters", func(h *Harness) {
	var city string

	BeforeEach(func() {
		driver := h.NewDriver(DriverOpts{City: h.NewCity(CityOpts{}).ID})
		city = driver.City
		for _, fare := range []int64{1500, 900, 2100, 900} {
			h.NewTrip(TripOpts{Driver: driver, Rider: h.NewRider(), Fare: fare})
		}
	})

	tripsOf := func(query string) gen.TripList {
		GinkgoHelper()
		res := h.GET("/v1/trips?city="+city+"&"+query, h.Admin)
		Expect(res.Status).To(Equal(http.StatusOK), "%s: %s", query, res.Body)
		var list gen.TripList
		res.Decode(&list)
		return list
	}

	It("takes a repeated or bracketed sort as the comma-separated one, in the order sent", func() {
		want := tripsOf("sort=-fare,created_at")
		Expect(want.Data).To(HaveLen(4))
		Expect(*want.Data[0].Fare).To(HaveField("Total", int64(2100)))
		for _, query := range []string{
			"sort=-fare&sort=created_at",
			"sort[]=-fare&sort[]=created_at",
			url.QueryEscape("sort[]") + "=-fare&" + url.QueryEscape("sort[]") + "=created_at",
			"sort=-fare&sort[]=created_at",
		} {
			Expect(tripsOf(query)).To(Equal(want), query)
		}
		Expect(tripsOf("sort=created_at&sort=-fare")).NotTo(Equal(want), "the order of the pieces is the order of the keys")
	})

	It("takes a repeated or bracketed fields as the comma-separated one", func() {
		want := tripsOf("fields=fare,city&limit=2")
		Expect(want.Data[0].Fare).NotTo(BeNil())
		Expect(want.Data[0].City).NotTo(BeNil())
		Expect(want.Data[0].Pickup).To(BeNil())
		for _, query := range []string{"fields=fare&fields=city&limit=2", "fields[]=fare&fields[]=city&limit=2"} {
			Expect(tripsOf(query)).To(Equal(want), query)
		}
	})

	It("binds cursors to the list, however the array was spelt", func() {
		first := tripsOf("sort=-fare&sort=created_at&limit=2")
		Expect(first.Pagination.NextCursor).NotTo(BeNil())
		next := tripsOf("sort=-fare,created_at&limit=2&cursor=" + url.QueryEscape(*first.Pagination.NextCursor))
		Expect(next.Data).To(HaveLen(2))
	})

	It("takes them on every list's sort", func() {
		res := h.GET("/v1/events?sort[]=created_at&limit=1", h.Admin)
		Expect(res.Status).To(Equal(http.StatusOK), "%s", res.Body)
	})

	DescribeTable("still refuses, naming the parameter",
		func(query, location, message string) {
			res := h.GET("/v1/trips?"+query, h.Admin)
			Expect(res.Status).To(Equal(http.StatusBadRequest), "%s", res.Body)
			p := res.Problem()
			Expect(p.Code).To(Equal("invalid_request"))
			Expect(*p.Errors).To(ContainElement(And(HaveField("Location", location), HaveField("Message", ContainSubstring(message)))))
		},
		Entry("a parameter that is not an array, repeated", "limit=1&limit=2", "query.limit", "given more than once"),
		Entry("a parameter that is not an array, with brackets", "limit[]=2", "query.limit[]", "unknown parameter"),
		Entry("too many sort keys in pieces", "sort=fare&sort=-created_at&sort=pickup_time&sort=-fare", "query.sort", ""),
		Entry("a sort key twice in pieces", "sort=fare&sort=-fare", "query.sort", ""),
		Entry("an unknown field in pieces", "fields[]=fare&fields[]=secret", "query.fields", ""),
	)
})
