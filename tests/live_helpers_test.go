package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/coder/websocket"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/store"
)

// liveMessage is one Server-Sent Event of a trip stream.
type liveMessage struct {
	ID     string
	Update map[string]any
}

// tripStream reads GET /v1/trips/{tripId}/updates as a browser's EventSource would.
type tripStream struct {
	Status   int
	Messages chan liveMessage // closed when the stream ends
	// Heartbeats counts the comment lines received.
	Heartbeats atomic.Int32
	// End is the data of the final `event: end` message (x-events.end), when the server sent
	// one; set before Messages is closed.
	End    map[string]any
	cancel context.CancelFunc
}

// FollowTrip opens a trip stream as key, with lastEventID when it is not empty. Every message
// is checked against the document's TripLiveUpdate, and the whole answer, once it ends,
// against the operation. The stream is closed after the spec.
func (h *Harness) FollowTrip(key, tripID, lastEventID string) *tripStream {
	GinkgoHelper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.URL+"/v1/trips/"+tripID+"/updates", nil)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	res, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	s := &tripStream{Status: res.StatusCode, Messages: make(chan liveMessage, 100), cancel: cancel}
	DeferCleanup(cancel)
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		out := &Response{Status: res.StatusCode, Header: res.Header, Body: body}
		Expect(validateResponse(req, out)).To(Succeed())
		close(s.Messages)
		return s
	}
	Expect(res.Header.Get("Content-Type")).To(Equal("text/event-stream"))
	schema := validator.doc.Components.Schemas["TripLiveUpdate"].Value
	endSchema := streamEventSchema("end")
	go func() {
		defer GinkgoRecover()
		defer close(s.Messages)
		defer res.Body.Close()
		var raw bytes.Buffer
		lines := bufio.NewScanner(io.TeeReader(res.Body, &raw))
		var msg liveMessage
		event := "message"
		for lines.Scan() {
			line := lines.Text()
			switch {
			case strings.HasPrefix(line, ":"):
				s.Heartbeats.Add(1)
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
				Expect(event).To(BeElementOf("trip", "end"))
			case strings.HasPrefix(line, "id: "):
				msg.ID = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: ") && event == "end":
				Expect(s.End).To(BeNil(), "one end message")
				data := []byte(strings.TrimPrefix(line, "data: "))
				var v any
				Expect(json.Unmarshal(data, &v)).To(Succeed())
				Expect(endSchema.VisitJSON(v)).To(Succeed(), "the end message breaks x-events.end: %s", data)
				Expect(json.Unmarshal(data, &s.End)).To(Succeed())
			case strings.HasPrefix(line, "data: "):
				Expect(s.End).To(BeNil(), "nothing after the end message")
				data := []byte(strings.TrimPrefix(line, "data: "))
				var v any
				Expect(json.Unmarshal(data, &v)).To(Succeed())
				Expect(schema.VisitJSON(v)).To(Succeed(), "a message breaks TripLiveUpdate: %s", data)
				Expect(json.Unmarshal(data, &msg.Update)).To(Succeed())
			case line == "" && msg.Update != nil:
				s.Messages <- msg
				msg, event = liveMessage{}, "message"
			case line == "":
				event = "message"
			}
		}
		if ctx.Err() != nil {
			return // closed by the spec, not by the server
		}
		out := &Response{Status: res.StatusCode, Header: res.Header, Body: raw.Bytes()}
		Expect(validateResponse(req, out)).To(Succeed())
	}()
	return s
}

// Next is the stream's next message, within a few seconds.
func (s *tripStream) Next() liveMessage {
	GinkgoHelper()
	select {
	case m, ok := <-s.Messages:
		Expect(ok).To(BeTrue(), "the stream ended")
		return m
	case <-time.After(5 * time.Second):
		Fail("no message within 5 s")
	}
	return liveMessage{}
}

// Ended waits for the server to end the stream.
func (s *tripStream) Ended() {
	GinkgoHelper()
	Eventually(s.Messages).Within(5 * time.Second).Should(BeClosed())
}

// Close ends the stream from the client's side.
func (s *tripStream) Close() { s.cancel() }

// goOnline takes the driver online through the API and reports where they are.
func (h *Harness) goOnline(driverKey string, d store.Driver, at map[string]any) {
	GinkgoHelper()
	res := h.Do(Request{Method: http.MethodPut, Path: "/v1/drivers/" + d.ID + "/availability", Key: driverKey,
		Body: map[string]any{"status": "online"}})
	Expect(res.Status).To(Equal(http.StatusOK), "%s", res.Body)
	Expect(res.JSON()["status"]).To(Equal("online"))
	h.reportPosition(driverKey, d.ID, at, time.Now())
}

// reportPosition posts one position of the driver, recorded at at.
func (h *Harness) reportPosition(driverKey, driverID string, p map[string]any, at time.Time) *Response {
	GinkgoHelper()
	report := map[string]any{"lat": p["lat"], "lng": p["lng"], "heading": 180, "speed": 8.3, "recorded_at": at.UTC().Format(time.RFC3339Nano)}
	res := h.Do(Request{Method: http.MethodPost, Path: "/v1/drivers/" + driverID + "/positions", Key: driverKey,
		Body: map[string]any{"positions": []any{report}}})
	Expect(res.Status).To(Equal(http.StatusOK), "%s", res.Body)
	return res
}

// gqlSubscription is Subscription.tripUpdated over a WebSocket (graphql-transport-ws).
type gqlSubscription struct {
	Updates chan map[string]any // closed at complete, or when the socket closes
	// CloseCode and CloseReason are the server's close frame, when it closed the socket; set
	// before Updates is closed.
	CloseCode   websocket.StatusCode
	CloseReason string
}

// SubscribeTrip subscribes to a trip's updates as key, the way Apollo Client's and urql's
// graphql-ws client does: connection_init with the key, then one subscribe.
func (h *Harness) SubscribeTrip(key, tripID string) *gqlSubscription {
	GinkgoHelper()
	ctx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(h.URL, "http")+"/v1/graphql",
		&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	Expect(err).NotTo(HaveOccurred())
	Expect(conn.Subprotocol()).To(Equal("graphql-transport-ws"))
	send := func(v any) {
		data, err := json.Marshal(v)
		Expect(err).NotTo(HaveOccurred())
		Expect(conn.Write(ctx, websocket.MessageText, data)).To(Succeed())
	}
	read := func() map[string]any {
		_, data, err := conn.Read(ctx)
		Expect(err).NotTo(HaveOccurred())
		var msg map[string]any
		Expect(json.Unmarshal(data, &msg)).To(Succeed())
		return msg
	}
	send(map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer " + key}})
	Expect(read()["type"]).To(Equal("connection_ack"))
	send(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{
		"query":     `subscription($id: ID!) { tripUpdated(id: $id) { tripId status etaMinutes driverLocation { lat lng recordedAt } updatedAt } }`,
		"variables": map[string]any{"id": tripID},
	}})
	sub := &gqlSubscription{Updates: make(chan map[string]any, 100)}
	go func() {
		defer GinkgoRecover()
		defer close(sub.Updates)
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				var closed websocket.CloseError
				if errors.As(err, &closed) {
					sub.CloseCode, sub.CloseReason = closed.Code, closed.Reason
				}
				return
			}
			Expect(string(data)).NotTo(ContainSubstring(`"type":"error"`))
			var msg struct {
				ID      string `json:"id"`
				Type    string `json:"type"`
				Payload struct {
					Data   map[string]map[string]any `json:"data"`
					Errors []any                     `json:"errors"`
				} `json:"payload"`
			}
			Expect(json.Unmarshal(data, &msg)).To(Succeed())
			switch msg.Type {
			case "next":
				Expect(msg.ID).To(Equal("1"))
				Expect(msg.Payload.Errors).To(BeEmpty())
				sub.Updates <- msg.Payload.Data["tripUpdated"]
			case "complete":
				_ = conn.Close(websocket.StatusNormalClosure, "")
				return
			default:
				Fail("unexpected message " + string(data))
			}
		}
	}()
	return sub
}

// Next is the subscription's next update, within a few seconds.
func (s *gqlSubscription) Next() map[string]any {
	GinkgoHelper()
	select {
	case u, ok := <-s.Updates:
		Expect(ok).To(BeTrue(), "the subscription completed")
		return u
	case <-time.After(5 * time.Second):
		Fail("no update within 5 s")
	}
	return nil
}

// liveTrip is a trip booked in a city of its own, whose one driver is online where the
// factory put them.
type liveTrip struct {
	city                store.City
	driver              store.Driver
	rider               store.Rider
	trip                gen.Trip
	driverKey, riderKey string
}

// bookLiveTrip books a trip as a new rider in a new city with one driver.
func (h *Harness) bookLiveTrip() liveTrip {
	GinkgoHelper()
	l := liveTrip{city: h.NewCity(CityOpts{}), rider: h.NewRider()}
	l.driver = h.NewDriver(DriverOpts{City: l.city.ID})
	l.driverKey, l.riderKey = h.Key(auth.RoleDriver, l.driver.ID), h.Key(auth.RoleRider, l.rider.ID)
	l.trip = h.BookTrip(l.riderKey, h.NewEstimate(l.riderKey, l.city).EstimateId)
	return l
}

// streamEventSchema is the schema the document gives an event of a trip stream, in the
// text/event-stream media type's x-events.
func streamEventSchema(event string) *openapi3.Schema {
	GinkgoHelper()
	media := validator.doc.Paths.Find("/v1/trips/{tripId}/updates").Get.Responses.Status(200).Value.Content["text/event-stream"]
	raw, err := json.Marshal(media.Extensions["x-events"])
	Expect(err).NotTo(HaveOccurred())
	var events map[string]*openapi3.Schema
	Expect(json.Unmarshal(raw, &events)).To(Succeed())
	Expect(events).To(HaveKey(event))
	return events[event]
}
