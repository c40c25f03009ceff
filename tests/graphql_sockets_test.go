package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/coder/websocket"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// rawSocket is a graphql-transport-ws client that lets a spec send what it likes.
type rawSocket struct {
	conn *websocket.Conn
}

func (h *Harness) openSocket() *rawSocket {
	GinkgoHelper()
	conn, _, err := websocket.Dial(context.Background(), "ws"+h.URL[len("http"):]+"/v1/graphql",
		&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = conn.CloseNow() })
	return &rawSocket{conn: conn}
}

func (s *rawSocket) send(text string) {
	GinkgoHelper()
	Expect(s.conn.Write(context.Background(), websocket.MessageText, []byte(text))).To(Succeed())
}

// read is the next message, or the close status when the server closed the socket.
func (s *rawSocket) read() (map[string]any, websocket.StatusCode) {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, data, err := s.conn.Read(ctx)
	if err != nil {
		code := websocket.CloseStatus(err)
		Expect(code).NotTo(Equal(websocket.StatusCode(-1)), "read: %v", err)
		return nil, code
	}
	var msg map[string]any
	Expect(json.Unmarshal(data, &msg)).To(Succeed())
	return msg, -1
}

func (s *rawSocket) init(key string) {
	GinkgoHelper()
	s.send(`{"type":"connection_init","payload":{"Authorization":"Bearer ` + key + `"}}`)
	msg, _ := s.read()
	Expect(msg).To(HaveKeyWithValue("type", "connection_ack"))
}

func (s *rawSocket) subscribe(id, tripID string) {
	GinkgoHelper()
	s.send(`{"id":"` + id + `","type":"subscribe","payload":{"query":"subscription($id: ID!) { tripUpdated(id: $id) { status } }","variables":{"id":"` + tripID + `"}}}`)
}

// errorCode reads messages until the one about operation id that is not a next, and returns
// its error code ("" for a complete).
func (s *rawSocket) errorCode(id string) string {
	GinkgoHelper()
	for {
		msg, closed := s.read()
		Expect(closed).To(Equal(websocket.StatusCode(-1)), "the socket closed")
		if msg["id"] != id || msg["type"] == "next" {
			continue
		}
		if msg["type"] == "complete" {
			return ""
		}
		Expect(msg["type"]).To(Equal("error"))
		return msg["payload"].([]any)[0].(map[string]any)["extensions"].(map[string]any)["code"].(string)
	}
}

// A GraphQL socket is bounded and metered like the requests it stands for.
var _ = ForEachEngine("GraphQL sockets", func(h *Harness) {
	It("take each operation from the key's read budget, as requests do", func() {
		cfg := testConfig()
		cfg.RateLimitRead, cfg.RateLimitPeriod = 1, 24*time.Hour // a bucket of two, never refilled in a run
		replica, _ := h.Replica(cfg, nil)
		l := h.bookLiveTrip()
		s := replica.openSocket()
		s.init(l.riderKey)
		for i := range 2 {
			s.subscribe(strconv.Itoa(i), l.trip.Id)
			msg, _ := s.read()
			Expect(msg).To(HaveKeyWithValue("type", "next"))
		}
		s.subscribe("2", l.trip.Id)
		Expect(s.errorCode("2")).To(Equal("RATE_LIMITED"))
		ExpectProblem(replica.GET("/v1/trips/"+l.trip.Id, l.riderKey), http.StatusTooManyRequests, "rate_limited")
	})

	It("run at most 100 operations at once", func() {
		l := h.bookLiveTrip()
		s := h.openSocket()
		s.init(l.riderKey)
		for i := range 100 {
			s.subscribe(strconv.Itoa(i), l.trip.Id)
		}
		s.subscribe("one-too-many", l.trip.Id)
		Expect(s.errorCode("one-too-many")).To(Equal("TOO_MANY_OPERATIONS"))
	})

	It("refuse a connection_init whose payload names a member twice", func() {
		l := h.bookLiveTrip()
		s := h.openSocket()
		s.send(`{"type":"connection_init","payload":{"Authorization":"Bearer ` + l.riderKey + `","Authorization":"Bearer ` + l.driverKey + `"}}`)
		_, closed := s.read()
		Expect(closed).To(Equal(websocket.StatusCode(4400)))
	})

	It("answer a malformed upgrade as any invalid request: problem+json naming the header, with a request id", func() {
		for header, value := range map[string]string{"Sec-WebSocket-Version": "8", "Sec-WebSocket-Key": "short", "Connection": "keep-alive"} {
			req, err := http.NewRequest(http.MethodGet, h.URL+"/v1/graphql", nil)
			Expect(err).NotTo(HaveOccurred())
			req.Header.Set("Upgrade", "websocket")
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Sec-WebSocket-Version", "13")
			req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
			req.Header.Set(header, value)
			res := h.Send(req)
			ExpectProblem(res, http.StatusBadRequest, "invalid_request")
			Expect((*res.Problem().Errors)[0].Location).To(Equal("header." + header))
		}
	})
})
