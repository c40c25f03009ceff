package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// tripShape says, for every field of store.Trip, where the API shows it: the member of the
// REST Trip and the field of the GraphQL Trip (dotted paths), or why it shows nowhere. A field
// added to the model and missing here fails the walk below, which then holds the write, the
// store's read (its column list and scan) and both views to it.
var tripShape = map[string]struct {
	rest, graphql string
	// why a field has no member: "internal" never leaves the service; "joined" is read from
	// the driver's or rider's row and walked through DriverID and RiderID; "scope" is the
	// account the trip belongs to, which bounds every read of it.
	not string
}{
	"ID":             {rest: "id", graphql: "id"},
	"Account":        {not: "scope"},
	"Status":         {rest: "status", graphql: "status"},
	"RideType":       {rest: "ride_type", graphql: "rideType"},
	"City":           {rest: "city", graphql: "city"},
	"RiderID":        {rest: "rider_id", graphql: "riderId"},
	"DriverID":       {rest: "driver_summary.id", graphql: "driver.id"},
	"Driver":         {not: "joined"},
	"Rider":          {not: "joined"},
	"PickupLat":      {rest: "pickup.lat", graphql: "pickup.lat"},
	"PickupLng":      {rest: "pickup.lng", graphql: "pickup.lng"},
	"PickupAddress":  {rest: "pickup.address", graphql: "pickup.address"},
	"DropoffLat":     {rest: "dropoff.lat", graphql: "dropoff.lat"},
	"DropoffLng":     {rest: "dropoff.lng", graphql: "dropoff.lng"},
	"DropoffAddress": {rest: "dropoff.address", graphql: "dropoff.address"},
	"PickupTime":     {rest: "pickup_time", graphql: "pickupTime"},
	"FareTotal":      {rest: "fare.total", graphql: "fare.total"},
	"FareCurrency":   {rest: "fare.currency", graphql: "fare.currency"},
	"ETAMinutes":     {rest: "eta_minutes", graphql: "etaMinutes"},
	"CreatedAt":      {rest: "created_at", graphql: "createdAt"},
	"UpdatedAt":      {rest: "updated_at", graphql: "updatedAt"},
	"CompletedAt":    {rest: "completed_at", graphql: "completedAt"},
	"CancelledAt":    {rest: "cancelled_at", graphql: "cancelledAt"},
	"RoutePolyline":  {not: "internal"},
	"MatchingScore":  {not: "internal"},
	"DriverPayout":   {not: "internal"},
	"PlatformCost":   {not: "internal"},
}

// pathIn reads a dotted path out of a decoded JSON object.
func pathIn(v any, path string) any {
	for _, part := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[part]
	}
	return v
}

// graphQLSelection is the selection set that asks for every GraphQL path of tripShape.
func graphQLSelection() string {
	tree := map[string]map[string]bool{}
	var leaves []string
	for _, f := range tripShape {
		if f.graphql == "" {
			continue
		}
		parent, child, nested := strings.Cut(f.graphql, ".")
		if !nested {
			leaves = append(leaves, parent)
			continue
		}
		if tree[parent] == nil {
			tree[parent] = map[string]bool{}
		}
		tree[parent][child] = true
	}
	out := strings.Join(leaves, " ")
	for parent, children := range tree {
		out += " " + parent + " {"
		for child := range children {
			out += " " + child
		}
		out += " }"
	}
	return out
}

var _ = ForEachEngine("A trip's shape", func(h *Harness) {
	It("holds every field of the model through a write, the store's read, REST and GraphQL", func(ctx SpecContext) {
		fields := reflect.TypeFor[store.Trip]()
		for i := range fields.NumField() {
			name := fields.Field(i).Name
			Expect(tripShape).To(HaveKey(name),
				"store.Trip.%s: say in tripShape where REST and GraphQL show it (and add it to store/trip_rows.go's tripReadColumns), or why they do not", name)
		}
		Expect(tripShape).To(HaveLen(fields.NumField()), "tripShape names a field store.Trip no longer has")

		// Each status shows some members only: walk an accepted trip (eta_minutes), a completed
		// one (completed_at) and a cancelled one (cancelled_at).
		for _, status := range []string{"accepted", "completed", "cancelled"} {
			driver := h.NewDriver(DriverOpts{Unavailable: status == "accepted"})
			rider := h.NewRider()
			// Booked after the driver's latest position, which eta_minutes then leaves alone:
			// the member shows the stored minutes rather than minutes live from the position.
			at := time.Now().UTC().Truncate(time.Microsecond).Add(time.Hour)
			pickup, dropoff, eta := "12 Shape St", "34 Shape Ave", 7
			written := store.Trip{
				ID: ride.NewID(ride.PrefixTrip), Status: status, RideType: "comfort", City: driver.City,
				RiderID: rider.ID, DriverID: driver.ID,
				PickupLat: 37.7912, PickupLng: -122.3934, PickupAddress: &pickup,
				DropoffLat: 37.7611, DropoffLng: -122.4211, DropoffAddress: &dropoff,
				PickupTime: at.Add(7 * time.Minute), FareTotal: 2345, FareCurrency: "usd", ETAMinutes: &eta,
				CreatedAt: at, UpdatedAt: at.Add(time.Second),
				RoutePolyline: "SECRET_POLYLINE_shape", MatchingScore: 0.4242, DriverPayout: 1759, PlatformCost: 123,
			}
			switch status {
			case "completed":
				done := at.Add(30 * time.Minute)
				written.CompletedAt = &done
				written.ETAMinutes = nil
			case "cancelled":
				cancelled := at.Add(2 * time.Minute)
				written.CancelledAt = &cancelled
				written.ETAMinutes = nil
			}
			written, err := h.Store.CreateTrip(context.Background(), written) // with the account it takes
			Expect(err).NotTo(HaveOccurred())

			read, err := h.Store.TripWithin(ctx, written.ID, store.TripReach{Account: store.DefaultAccount})
			Expect(err).NotTo(HaveOccurred())
			rest := h.GET("/v1/trips/"+written.ID, h.Admin)
			Expect(rest.Status).To(Equal(http.StatusOK), "%s", rest.Body)
			restBody := rest.JSON()
			gql := h.Query(h.Admin, `query($id: ID!) { trip(id: $id) { `+graphQLSelection()+` } }`, map[string]any{"id": written.ID})
			Expect(gql.Errors).To(BeEmpty())
			gqlTrip := gql.Data["trip"]

			wrote, got := reflect.ValueOf(written), reflect.ValueOf(read)
			for i := range fields.NumField() {
				name := fields.Field(i).Name
				shape := tripShape[name]
				if shape.not == "joined" {
					continue
				}
				value := wrote.Field(i).Interface()
				if shape.not == "internal" {
					Expect(got.Field(i).IsZero()).To(BeTrue(), "the store's API reads leave %s out", name)
					Expect(showsValue(rest.Body, value)).To(BeFalse(), "REST shows internal %s", name)
					continue
				}
				Expect(got.Field(i).Interface()).To(Equal(value), "the store's read of %s", name)
				if shape.not != "" {
					continue
				}
				Expect(same(pathIn(restBody, shape.rest), value, false)).To(BeTrue(),
					"REST %s is %v, the trip's %s %v", shape.rest, pathIn(restBody, shape.rest), name, value)
				Expect(same(pathIn(gqlTrip, shape.graphql), value, true)).To(BeTrue(),
					"GraphQL %s is %v, the trip's %s %v", shape.graphql, pathIn(gqlTrip, shape.graphql), name, value)
			}
		}
	})
})

// same compares a member of an answer with the value written: times as instants, GraphQL's
// enums in capitals, numbers as JSON numbers, a nil pointer as an absent member.
func same(member, value any, graphql bool) bool {
	rv := reflect.ValueOf(value)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return member == nil
		}
		value = rv.Elem().Interface()
	}
	switch v := value.(type) {
	case time.Time:
		s, ok := member.(string)
		if !ok {
			return false
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		return err == nil && t.Equal(v)
	case string:
		return member == v || (graphql && member == strings.ToUpper(v))
	default:
		want, _ := json.Marshal(v)
		got, _ := json.Marshal(member)
		return string(want) == string(got)
	}
}

// showsValue tells whether a JSON body holds v: a string anywhere in it, a number as a whole
// value (123 inside a timestamp's microseconds is not the number 123).
func showsValue(body []byte, v any) bool {
	if s, ok := v.(string); ok {
		return bytes.Contains(body, []byte(s))
	}
	return regexp.MustCompile(`[:\[,]\s*` + regexp.QuoteMeta(fmt.Sprint(v)) + `\s*[,}\]]`).Match(body)
}
