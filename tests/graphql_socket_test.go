package tests

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/coder/websocket"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server"
)

var _ = ForEachEngine("A GraphQL socket", func(h *Harness) {
	dial := func(ctx context.Context, url string) *websocket.Conn {
		GinkgoHelper()
		conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http")+"/v1/graphql",
			&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = conn.CloseNow() })
		return conn
	}

	It("that never sends connection_init is closed with 4408 when the wait is up", func(ctx SpecContext) {
		replica, _ := h.Replica(server.Config{GraphQLInitTimeout: 200 * time.Millisecond}, nil)
		conn := dial(ctx, replica.URL)
		_, _, err := conn.Read(ctx)
		Expect(websocket.CloseStatus(err)).To(Equal(websocket.StatusCode(4408)), "%v", err)
	}, SpecTimeout(30*time.Second))

	It("that subscribes twice under one id is closed with 4409, and nothing is logged as an error", func(ctx SpecContext) {
		logs := &lockedBuffer{}
		replica, _ := h.Replica(server.Config{}, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
		trip := h.bookLiveTrip()
		conn := dial(ctx, replica.URL)
		Expect(conn.Write(ctx, websocket.MessageText, []byte(`{"type":"connection_init","payload":{"Authorization":"Bearer `+trip.riderKey+`"}}`))).To(Succeed())
		_, ack, err := conn.Read(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(ack)).To(ContainSubstring("connection_ack"))
		subscribe := []byte(`{"id":"s1","type":"subscribe","payload":{"query":"subscription { tripUpdated(id: \"` + trip.trip.Id + `\") { status } }"}}`)
		// The second right behind the first: the socket closes while the first still starts.
		Expect(conn.Write(ctx, websocket.MessageText, subscribe)).To(Succeed())
		Expect(conn.Write(ctx, websocket.MessageText, subscribe)).To(Succeed())
		for {
			_, msg, err := conn.Read(ctx)
			if err != nil {
				Expect(websocket.CloseStatus(err)).To(Equal(websocket.StatusCode(4409)), "%v", err)
				break
			}
			Expect(string(msg)).To(ContainSubstring(`"type":"next"`))
		}
		Consistently(logs.String, 300*time.Millisecond).ShouldNot(ContainSubstring(`"level":"ERROR"`))
	}, SpecTimeout(30*time.Second))
})
