package server

import (
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/internal/jsontext"
)

// Trips are the most read answers, and encoding/json spent a quarter of the server's CPU on a
// page of them: reflection over every member, and for each of a trip's five times a
// MarshalJSON call whose output it then parses again to check it. encodeAnswer writes the
// same bytes for them directly: members in the generated structs' order, the
// same omitempty rules, numbers and escaping as encoding/json (HTML-safe, as json.Encoder
// does by default), and the encoder's trailing newline. trip_json_test.go holds them to that,
// byte for byte, against encoding/json for trips with every member set (found by reflection,
// so a member added to the document fails the test until it is written here too), none set,
// and awkward strings and numbers.

// encodeAnswer is the JSON body of a 200 answer: the bytes json.Encoder would write for v.
func encodeAnswer(b []byte, v any) ([]byte, error) {
	var m members
	switch v := v.(type) {
	case gen.Trip:
		m.b = b
		m.trip(&v)
		return m.end()
	case gen.TripList:
		m.b = b
		m.tripList(&v)
		return m.end()
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return b, err
	}
	return append(append(b, raw...), '\n'), nil
}

// members writes JSON objects: the commas between members, and the first value encoding/json
// would have refused (a NaN, a time outside years 0–9999), which fails the whole answer as
// it would have failed there.
type members struct {
	b    []byte
	some bool
	err  error
}

func (m *members) end() ([]byte, error) {
	if m.err != nil {
		return m.b, m.err
	}
	return append(m.b, '\n'), nil
}

func (m *members) tripList(l *gen.TripList) {
	m.b = append(m.b, `{"data":`...)
	if l.Data == nil {
		m.b = append(m.b, "null"...)
	} else {
		m.b = append(m.b, '[')
		for i := range l.Data {
			if i > 0 {
				m.b = append(m.b, ',')
			}
			m.trip(&l.Data[i])
		}
		m.b = append(m.b, ']')
	}
	p := &l.Pagination
	m.b = append(m.b, `,"pagination":{"count":`...)
	m.b = strconv.AppendInt(m.b, int64(p.Count), 10)
	m.b = append(m.b, `,"has_more":`...)
	m.b = strconv.AppendBool(m.b, p.HasMore)
	m.b = append(m.b, `,"next_cursor":`...)
	m.b = appendOptionalString(m.b, p.NextCursor)
	m.b = append(m.b, `,"prev_cursor":`...)
	m.b = appendOptionalString(m.b, p.PrevCursor)
	m.b = append(m.b, "}}"...)
}

func (m *members) trip(t *gen.Trip) {
	m.b, m.some = append(m.b, '{'), false
	m.time("cancelled_at", t.CancelledAt)
	if t.City != nil {
		m.key("city")
		m.b = appendString(m.b, *t.City)
	}
	m.time("completed_at", t.CompletedAt)
	m.time("created_at", t.CreatedAt)
	if l := t.DriverLocation; l != nil {
		m.key("driver_location")
		m.b = append(m.b, '{')
		if l.Heading != nil {
			m.b = append(m.b, `"heading":`...)
			m.float(*l.Heading)
			m.b = append(m.b, ',')
		}
		m.b = append(m.b, `"lat":`...)
		m.float(l.Lat)
		m.b = append(m.b, `,"lng":`...)
		m.float(l.Lng)
		m.time("recorded_at", &l.RecordedAt) // m.some holds: its key comes after a comma
		if l.Speed != nil {
			m.b = append(m.b, `,"speed":`...)
			m.float(*l.Speed)
		}
		m.b, m.some = append(m.b, '}'), true
	}
	if d := t.DriverSummary; d != nil {
		m.key("driver_summary")
		m.b = append(m.b, `{"id":`...)
		m.b = appendString(m.b, d.Id)
		m.b = append(m.b, `,"name":`...)
		m.b = appendString(m.b, d.Name)
		if d.Photo != nil {
			m.b = append(m.b, `,"photo":`...)
			m.b = appendString(m.b, *d.Photo)
		}
		if d.Rating != nil {
			m.b = append(m.b, `,"rating":`...)
			m.float(*d.Rating)
		}
		m.b = append(m.b, '}')
	}
	m.location("dropoff", t.Dropoff)
	if t.EtaMinutes != nil {
		m.key("eta_minutes")
		m.b = strconv.AppendInt(m.b, int64(*t.EtaMinutes), 10)
	}
	if f := t.Fare; f != nil {
		m.key("fare")
		m.b = append(m.b, `{"currency":`...)
		m.b = appendString(m.b, f.Currency)
		m.b = append(m.b, `,"total":`...)
		m.b = strconv.AppendInt(m.b, f.Total, 10)
		m.b = append(m.b, '}')
	}
	m.key("id")
	m.b = appendString(m.b, t.Id)
	m.location("pickup", t.Pickup)
	m.time("pickup_time", t.PickupTime)
	if t.RideType != nil {
		m.key("ride_type")
		m.b = appendString(m.b, string(*t.RideType))
	}
	if t.RiderId != nil {
		m.key("rider_id")
		m.b = appendString(m.b, *t.RiderId)
	}
	if r := t.RiderSummary; r != nil {
		m.key("rider_summary")
		m.b = append(m.b, `{"id":`...)
		m.b = appendString(m.b, r.Id)
		m.b = append(m.b, `,"name":`...)
		m.b = appendString(m.b, r.Name)
		m.b = append(m.b, `,"rating":`...)
		m.float(r.Rating)
		m.b = append(m.b, '}')
	}
	m.key("status")
	m.b = appendString(m.b, string(t.Status))
	m.time("updated_at", t.UpdatedAt)
	m.b = append(m.b, '}')
}

func (m *members) key(k string) {
	if m.some {
		m.b = append(m.b, ',')
	}
	m.some = true
	m.b = append(append(append(m.b, '"'), k...), `":`...)
}

func (m *members) time(k string, t *time.Time) {
	if t == nil {
		return
	}
	if y := t.Year(); y < 0 || y > 9999 {
		m.fail(&json.UnsupportedValueError{Str: t.String()})
		return
	}
	m.key(k)
	m.b = append(t.AppendFormat(append(m.b, '"'), time.RFC3339Nano), '"')
}

func (m *members) location(k string, l *gen.Location) {
	if l == nil {
		return
	}
	m.key(k)
	m.b = append(m.b, '{')
	if l.Address != nil {
		m.b = append(m.b, `"address":`...)
		m.b = appendString(m.b, *l.Address)
		m.b = append(m.b, ',')
	}
	m.b = append(m.b, `"lat":`...)
	m.float(l.Lat)
	m.b = append(m.b, `,"lng":`...)
	m.float(l.Lng)
	m.b = append(m.b, '}')
}

func appendOptionalString(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendString(b, *s)
}

// appendString writes s as a JSON string, escaped as encoding/json escapes it by default.
func appendString(b []byte, s string) []byte { return jsontext.EncodingJSON.AppendString(b, s) }

func (m *members) fail(err error) {
	if m.err == nil {
		m.err = err
	}
}

// float writes f as encoding/json writes a float64: the shortest representation, in
// exponent form only below 1e-6 or from 1e21 on, with a two-digit exponent shortened.
func (m *members) float(f float64) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		m.fail(&json.UnsupportedValueError{Str: strconv.FormatFloat(f, 'g', -1, 64)})
		return
	}
	b := m.b
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(b) - start; n >= 4 && b[len(b)-4] == 'e' && b[len(b)-3] == '-' && b[len(b)-2] == '0' {
			b[len(b)-2] = b[len(b)-1]
			b = b[:len(b)-1]
		}
	}
	m.b = b
}
