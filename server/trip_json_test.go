package server

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/gen"
)

// encoded is what json.Encoder writes for v: the bytes encodeAnswer must reproduce.
func encoded(v any) string {
	var buf bytes.Buffer
	Expect(json.NewEncoder(&buf).Encode(v)).To(Succeed())
	return buf.String()
}

func answer(v any) string {
	body, err := encodeAnswer(nil, v)
	Expect(err).NotTo(HaveOccurred())
	return string(body)
}

// fillAll sets every member of the struct v points to, pointers and nested structs included,
// to a value that differs per member, so that a member encodeAnswer does not write shows up
// as a difference from encoding/json.
func fillAll(v reflect.Value, seed *int) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillAll(v.Elem(), seed)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			*seed++
			v.Set(reflect.ValueOf(time.Date(2026, 11, 21, 8, *seed, 7, 123456000, time.UTC)))
			return
		}
		for i := range v.NumField() {
			fillAll(v.Field(i), seed)
		}
	case reflect.String:
		*seed++
		v.SetString("value-" + string(rune('a'+*seed%26)))
	case reflect.Float32, reflect.Float64:
		*seed++
		v.SetFloat(float64(*seed) + 0.25)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		*seed++
		v.SetInt(int64(*seed))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fillAll(v.Index(0), seed)
	default:
		Fail("fillAll: a member of kind " + v.Kind().String() + " needs a case here and in encodeAnswer")
	}
}

var _ = Describe("encodeAnswer", func() {
	full := func() gen.Trip {
		var t gen.Trip
		seed := 0
		fillAll(reflect.ValueOf(&t).Elem(), &seed)
		return t
	}

	It("writes json.Encoder's bytes for a trip with every member the document gives it", func() {
		t := full()
		Expect(answer(t)).To(Equal(encoded(t)))
	})

	It("writes json.Encoder's bytes for a sparse trip (fields=) and for a page", func() {
		sparse := gen.Trip{Id: "trp_1", Status: gen.Completed}
		Expect(answer(sparse)).To(Equal(encoded(sparse)))

		next := "AQAB-_x"
		var page gen.TripList
		seed := 0
		fillAll(reflect.ValueOf(&page).Elem(), &seed)
		page.Data = append(page.Data, sparse, full())
		Expect(answer(page)).To(Equal(encoded(page)))

		for _, p := range []gen.TripList{
			{},
			{Data: []gen.Trip{}, Pagination: gen.Pagination{HasMore: true, NextCursor: &next}},
		} {
			Expect(answer(p)).To(Equal(encoded(p)))
		}
	})

	It("escapes strings and formats numbers and times as encoding/json does", func() {
		for _, s := range []string{`<script>&"\`, "a<b>&c", "Zürich", "line\u2028sep", "bad\xffutf8", "tab\there\x01", "\b\f\n\r\x1f\x7f", "end\u2029", "\xe2\x80", "日本語 — ok", ""} {
			t := full()
			*t.City, t.Id, t.DriverSummary.Name, *t.Pickup.Address = s, s, s, s
			Expect(answer(t)).To(Equal(encoded(t)), "string %q", s)
		}
		for _, f := range []float64{0, math.Copysign(0, -1), 1e-7, 1e-6, 1e20, 1e21, 123456789.123, -38.96238,
			5e-324, math.MaxFloat64, 4.87, -117.9663} {
			t := full()
			t.Pickup.Lat, *t.DriverSummary.Rating = f, f
			Expect(answer(t)).To(Equal(encoded(t)), "float %v", f)
		}
		zone := time.FixedZone("", -7*3600)
		for _, at := range []time.Time{time.Date(2026, 1, 2, 3, 4, 5, 0, zone), time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)} {
			t := full()
			t.CreatedAt, t.CancelledAt = &at, &at
			Expect(answer(t)).To(Equal(encoded(t)), "time %v", at)
		}
	})

	It("fails where encoding/json fails: a NaN, a year past 9999", func() {
		t := full()
		t.Pickup.Lat = math.NaN()
		_, err := encodeAnswer(nil, t)
		Expect(err).To(HaveOccurred())

		t = full()
		far := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
		t.UpdatedAt = &far
		_, err = encodeAnswer(nil, gen.TripList{Data: []gen.Trip{t}})
		Expect(err).To(HaveOccurred())
		_, err = json.Marshal(t)
		Expect(err).To(HaveOccurred())
	})

	It("leaves every other answer to encoding/json", func() {
		p := gen.Payment{Id: "pay_1", TripId: "trp_1", Amount: 1850, Currency: "usd"}
		Expect(answer(p)).To(Equal(encoded(p)))
	})
})
