package ride_test

import (
	"errors"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server/ride"
)

var _ = Describe("List parameters", func() {
	tripSorts := []string{"created_at", "pickup_time", "fare"}
	tripFields := []string{"id", "status", "ride_type", "city", "fare", "created_at"}

	DescribeTable("ParseSort accepts",
		func(s string, want []ride.SortKey) {
			Expect(ride.ParseSort(s, tripSorts)).To(Equal(want))
		},
		Entry("one ascending key", "created_at", []ride.SortKey{{Field: "created_at"}}),
		Entry("one descending key", "-created_at", []ride.SortKey{{Field: "created_at", Desc: true}}),
		Entry("two keys", "-fare,created_at", []ride.SortKey{{Field: "fare", Desc: true}, {Field: "created_at"}}),
		Entry("three keys", "pickup_time,-fare,-created_at", []ride.SortKey{
			{Field: "pickup_time"}, {Field: "fare", Desc: true}, {Field: "created_at", Desc: true},
		}),
	)

	DescribeTable("ParseSort refuses with a FieldError",
		func(s, value string) {
			keys, err := ride.ParseSort(s, tripSorts)
			Expect(keys).To(BeNil())
			var fe *ride.FieldError
			Expect(errors.As(err, &fe)).To(BeTrue())
			Expect(fe.Param).To(Equal("sort"))
			Expect(fe.Value).To(Equal(value))
			Expect(fe.Message).NotTo(BeEmpty())
		},
		Entry("empty", "", ""),
		Entry("lone comma", ",", ","),
		Entry("trailing comma", "created_at,", "created_at,"),
		Entry("dash alone", "-", "-"),
		Entry("double dash", "--fare", "--fare"),
		Entry("id is the implicit tiebreaker", "id", "id"),
		Entry("descending id", "-fare,-id", "-id"),
		Entry("unknown field", "name", "name"),
		Entry("plus sign is not a direction", "+fare", "+fare"),
		Entry("case matters", "FARE", "FARE"),
		Entry("no whitespace trimming", "fare, created_at", " created_at"),
		Entry("duplicate", "fare,fare", "fare"),
		Entry("duplicate in the other direction", "fare,-fare", "-fare"),
		Entry("four keys", "fare,created_at,pickup_time,-fare", "fare,created_at,pickup_time,-fare"),
	)

	DescribeTable("ParseFields accepts",
		func(s string, want []string) {
			Expect(ride.ParseFields(s, tripFields)).To(Equal(want))
		},
		Entry("one field, id not added", "status", []string{"status"}),
		Entry("id alone", "id", []string{"id"}),
		Entry("several in request order", "fare,id,status", []string{"fare", "id", "status"}),
		Entry("duplicates dropped", "status,fare,status", []string{"status", "fare"}),
	)

	It("ParseFields accepts id even when allowed omits it", func() {
		Expect(ride.ParseFields("id,status", []string{"status"})).To(Equal([]string{"id", "status"}))
	})

	DescribeTable("ParseFields refuses with a FieldError",
		func(s, value string) {
			fields, err := ride.ParseFields(s, tripFields)
			Expect(fields).To(BeNil())
			var fe *ride.FieldError
			Expect(errors.As(err, &fe)).To(BeTrue())
			Expect(fe.Param).To(Equal("fields"))
			Expect(fe.Value).To(Equal(value))
		},
		Entry("empty", "", ""),
		Entry("lone comma", ",", ","),
		Entry("empty name in the middle", "status,,fare", "status,,fare"),
		Entry("unknown name", "status,route_polyline", "route_polyline"),
		Entry("case matters", "Status", "Status"),
	)

	It("formats a FieldError for logs", func() {
		err := &ride.FieldError{Param: "sort", Value: "name", Message: "unknown sort field"}
		Expect(err.Error()).To(Equal(`ride: invalid sort "name": unknown sort field`))
	})
})
