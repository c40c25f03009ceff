package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/coder/websocket"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server/auth"
)

// A stream or a socket lives only as long as the key that opened it: what THREAT-MODEL.md calls
// a session that outlives its credential.
var _ = ForEachEngine("What a key opened", func(h *Harness) {
	// riderKeyThroughAPI makes a key for the live trip's rider with POST /v1/api-keys, so that
	// it can be revoked or expire like any key an app holds.
	riderKeyThroughAPI := func(l liveTrip, body map[string]any) (secret, id string) {
		GinkgoHelper()
		body["role"], body["subject"] = "rider", l.rider.ID
		res := h.Do(Request{Method: http.MethodPost, Path: "/v1/api-keys", Key: h.Admin, Body: body})
		Expect(res.Status).To(Equal(http.StatusCreated), "%s", res.Body)
		return res.JSON()["secret"].(string), res.JSON()["id"].(string)
	}

	It("ends on every replica within a second of a revocation on another: the stream with an end message, the socket with 4403", func(ctx SpecContext) {
		l := h.bookLiveTrip()
		secret, id := riderKeyThroughAPI(l, map[string]any{})
		// Replica B has a store and an authenticator of its own; A revokes.
		b := h.ServerOn(ctx, h.DatabaseURL, testConfig(), false)
		stream := b.FollowTrip(secret, l.trip.Id, "")
		Expect(stream.Status).To(Equal(http.StatusOK))
		Expect(stream.Next().Update["status"]).To(Equal("accepted"))
		sub := b.SubscribeTrip(secret, l.trip.Id)
		Expect(sub.Next()["status"]).To(Equal("ACCEPTED"))

		Expect(h.Do(Request{Method: http.MethodDelete, Path: "/v1/api-keys/" + id, Key: h.Admin}).Status).To(Equal(http.StatusNoContent))
		revoked := time.Now()
		Eventually(stream.Messages).WithTimeout(time.Second).Should(BeClosed())
		Eventually(sub.Updates).WithTimeout(time.Second).Should(BeClosed())
		GinkgoWriter.Printf("stream and socket ended %v after the revocation\n", time.Since(revoked))
		Expect(stream.End).To(Equal(map[string]any{"code": "api_key_revoked", "detail": "The API key was revoked."}))
		Expect(sub.CloseCode).To(Equal(websocket.StatusCode(4403)))
		Expect(sub.CloseReason).To(Equal("api_key_revoked: The API key was revoked."))

		// Nothing opened with it again, on either replica.
		for _, on := range []*Harness{h, b} {
			ExpectProblem(on.GET("/v1/trips/"+l.trip.Id+"/updates", secret), http.StatusUnauthorized, "unauthenticated")
			Expect(on.FollowTrip(secret, l.trip.Id, "").Status).To(Equal(http.StatusUnauthorized))
		}
	})

	It("end when the key expires, with api_key_expired", func() {
		l := h.bookLiveTrip()
		expires := time.Now().Add(2 * time.Second).UTC()
		secret, _ := riderKeyThroughAPI(l, map[string]any{"expires_at": expires.Format(time.RFC3339Nano)})
		stream := h.FollowTrip(secret, l.trip.Id, "")
		Expect(stream.Next().Update["status"]).To(Equal("accepted"))
		sub := h.SubscribeTrip(secret, l.trip.Id)
		Expect(sub.Next()["status"]).To(Equal("ACCEPTED"))

		Eventually(stream.Messages).WithTimeout(10 * time.Second).Should(BeClosed())
		Eventually(sub.Updates).WithTimeout(10 * time.Second).Should(BeClosed())
		Expect(time.Now()).To(BeTemporally(">=", expires), "not before the key's expiry")
		Expect(stream.End).To(HaveKeyWithValue("code", "api_key_expired"))
		Expect(sub.CloseCode).To(Equal(websocket.StatusCode(4403)))
		Expect(sub.CloseReason).To(HavePrefix("api_key_expired: "))
	})

	It("are at most 100 per key on a replica: past that a stream is 429 and a socket closes with 4429", func() {
		l := h.bookLiveTrip()
		secret, _ := riderKeyThroughAPI(l, map[string]any{})
		streams := make([]*tripStream, auth.MaxSessionsPerKey)
		for i := range streams {
			streams[i] = h.FollowTrip(secret, l.trip.Id, "")
			Expect(streams[i].Status).To(Equal(http.StatusOK))
		}
		Expect(h.FollowTrip(secret, l.trip.Id, "").Status).To(Equal(http.StatusTooManyRequests))

		conn, _, err := websocket.Dial(context.Background(), "ws"+h.URL[len("http"):]+"/v1/graphql",
			&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
		Expect(err).NotTo(HaveOccurred())
		defer conn.CloseNow()
		Expect(conn.Write(context.Background(), websocket.MessageText,
			[]byte(`{"type":"connection_init","payload":{"Authorization":"Bearer `+secret+`"}}`))).To(Succeed())
		_, _, err = conn.Read(context.Background())
		Expect(websocket.CloseStatus(err)).To(Equal(websocket.StatusCode(4429)))

		// Another key of the same rider is not held back by this one's streams.
		other, _ := riderKeyThroughAPI(l, map[string]any{})
		Expect(h.FollowTrip(other, l.trip.Id, "").Status).To(Equal(http.StatusOK))
		// Closing one makes room for one.
		streams[0].Close()
		Eventually(func() int {
			s := h.FollowTrip(secret, l.trip.Id, "")
			defer s.Close()
			return s.Status
		}).WithTimeout(5 * time.Second).Should(Equal(http.StatusOK))
	})

	It("are bounded per replica, all accounts together, and a full replica never refuses an account because another holds more", func(spec SpecContext) {
		l := h.bookLiveTrip() // in the suite's account
		cfg := testConfig()
		cfg.MaxSessions = 3
		b := h.ServerOn(spec, h.DatabaseURL, cfg, false)
		ctx, cancel := context.WithTimeout(spec, time.Minute) // a socket's reads fail rather than hang
		defer cancel()
		openSocket := func(key string) (*websocket.Conn, error) { return b.authenticatedSocket(ctx, key) }
		follow := func(key string) *tripStream {
			GinkgoHelper()
			stream := b.FollowTrip(key, l.trip.Id, "")
			DeferCleanup(stream.Close)
			return stream
		}
		open := func(stream *tripStream) bool {
			select {
			case _, ok := <-stream.Messages:
				return ok
			default:
				return true
			}
		}

		// The suite's account fills the replica: two streams, then a socket.
		first, second := follow(l.riderKey), follow(l.riderKey)
		Expect(first.Status).To(Equal(http.StatusOK))
		Expect(second.Status).To(Equal(http.StatusOK))
		Expect(first.Next().Update["status"]).To(Equal("accepted"))
		Expect(second.Next().Update["status"]).To(Equal("accepted"))
		newest, err := openSocket(h.Admin)
		Expect(err).NotTo(HaveOccurred())

		// Another account's socket takes the place of that account's newest session.
		secondAccount := newAccount("second")
		_, err = openSocket(b.KeyIn("admin", "", secondAccount))
		Expect(err).NotTo(HaveOccurred())
		_, _, err = newest.Read(ctx)
		Expect(websocket.CloseStatus(err)).To(Equal(websocket.StatusTryAgainLater))

		// Two against one: neither account may take the other's place, so both are refused.
		res := b.Do(Request{Method: http.MethodGet, Path: "/v1/trips/" + l.trip.Id + "/updates", Key: l.driverKey,
			Header: map[string]string{"Accept": "text/event-stream"}})
		ExpectProblem(res, http.StatusServiceUnavailable, "unavailable")
		Expect(res.Header.Get("Retry-After")).NotTo(BeEmpty())
		_, err = openSocket(b.KeyIn("admin", "", secondAccount))
		Expect(websocket.CloseStatus(err)).To(Equal(websocket.StatusTryAgainLater))

		// A third account takes the newest stream's place; the oldest stays.
		third, err := openSocket(b.KeyIn("admin", "", newAccount("third")))
		Expect(err).NotTo(HaveOccurred())
		Eventually(second.Messages).WithTimeout(5 * time.Second).Should(BeClosed())
		Expect(second.End).To(BeNil(), "a stream that gave way has no end message: the client reconnects")
		Expect(open(first)).To(BeTrue())

		// One each: a fourth account is refused, and requests are served all the same.
		fourth := b.KeyIn("admin", "", newAccount("fourth"))
		_, err = openSocket(fourth)
		Expect(websocket.CloseStatus(err)).To(Equal(websocket.StatusTryAgainLater))
		Expect(b.GET("/v1/trips/"+l.trip.Id, l.driverKey).Status).To(Equal(http.StatusOK))

		// A session that closes makes room.
		Expect(third.Close(websocket.StatusNormalClosure, "")).To(Succeed())
		Eventually(func() error {
			conn, err := openSocket(fourth)
			if err == nil {
				_ = conn.CloseNow()
			}
			return err
		}).WithTimeout(5 * time.Second).Should(Succeed())
	})

	It("count a socket's operations too: a full replica refuses one, and ends the newest of the account holding the most for another account", func(spec SpecContext) {
		l := h.bookLiveTrip()
		cfg := testConfig()
		cfg.MaxSessions = 3
		b := h.ServerOn(spec, h.DatabaseURL, cfg, false)
		ctx, cancel := context.WithTimeout(spec, time.Minute) // a socket's reads fail rather than hang
		defer cancel()
		dial := func(key string) *websocket.Conn {
			GinkgoHelper()
			conn, err := b.authenticatedSocket(ctx, key)
			Expect(err).NotTo(HaveOccurred())
			return conn
		}
		// next is the socket's next message other than a subscription's update.
		next := func(conn *websocket.Conn) map[string]any {
			GinkgoHelper()
			for {
				_, data, err := conn.Read(ctx)
				Expect(err).NotTo(HaveOccurred())
				var msg map[string]any
				Expect(json.Unmarshal(data, &msg)).To(Succeed())
				if msg["type"] != "next" {
					return msg
				}
			}
		}
		subscribe := func(conn *websocket.Conn, id string) {
			GinkgoHelper()
			Expect(conn.Write(ctx, websocket.MessageText, []byte(`{"id":"`+id+`","type":"subscribe","payload":{"query":"subscription { tripUpdated(id: \"`+
				l.trip.Id+`\") { status } }"}}`))).To(Succeed())
		}
		errorCode := func(msg map[string]any) any {
			GinkgoHelper()
			Expect(msg["type"]).To(Equal("error"), "%v", msg)
			return msg["payload"].([]any)[0].(map[string]any)["extensions"].(map[string]any)["code"]
		}

		// The rider's socket and two subscriptions fill the replica (the socket takes its
		// messages in order); a third is refused.
		rider := dial(l.riderKey)
		subscribe(rider, "1")
		subscribe(rider, "2")
		subscribe(rider, "3")
		refused := next(rider)
		Expect(refused["id"]).To(Equal("3"))
		Expect(errorCode(refused)).To(Equal("UNAVAILABLE"))

		// Another account's socket takes the place of the newest subscription, which ends with
		// an error message.
		dial(b.KeyIn("admin", "", newAccount("operations")))
		ended := next(rider)
		Expect(ended["id"]).To(Equal("2"))
		Expect(errorCode(ended)).To(Equal("UNAVAILABLE"))
	})

	It("refuse a socket whose Authorization header is sent twice", func() {
		account := newAccount("twice")
		key := h.KeyIn("admin", "", account)
		header := http.Header{}
		header.Add("Authorization", "Bearer "+key)
		header.Add("Authorization", "Bearer "+key)
		_, res, err := websocket.Dial(context.Background(), "ws"+h.URL[len("http"):]+"/v1/graphql",
			&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: header})
		Expect(err).To(HaveOccurred())
		Expect(res.StatusCode).To(Equal(http.StatusBadRequest))
	})
})

// authenticatedSocket opens a GraphQL socket on h and authenticates it as key: the socket once
// acknowledged, or the error that closed it. It closes when the spec ends.
func (h *Harness) authenticatedSocket(ctx context.Context, key string) (*websocket.Conn, error) {
	GinkgoHelper()
	conn, _, err := websocket.Dial(ctx, "ws"+h.URL[len("http"):]+"/v1/graphql",
		&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = conn.CloseNow() })
	Expect(conn.Write(ctx, websocket.MessageText,
		[]byte(`{"type":"connection_init","payload":{"Authorization":"Bearer `+key+`"}}`))).To(Succeed())
	_, data, err := conn.Read(ctx)
	if err == nil {
		Expect(string(data)).To(ContainSubstring(`"connection_ack"`))
	}
	return conn, err
}
