package tests

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server"
)

var _ = ForEachEngine("Revoked API keys", func(h *Harness) {
	It("are refused with 401 once the short authentication cache has let go of them", func() {
		clock := NewFakeClock(time.Now())
		clocked := h.WithClock(clock.Now)
		key := h.Key(server.RoleAdmin, "")
		Expect(clocked.GET("/v1/trips?limit=1", key).Status).To(Equal(200))

		sum := sha256.Sum256([]byte(key)) // keys are stored as the hex SHA-256 of the secret
		Expect(h.Store.RevokeAPIKey(context.Background(), hex.EncodeToString(sum[:]))).To(Succeed())

		// A server that has not seen the key asks the store at once.
		res := h.WithClock(clock.Now).GET("/v1/trips?limit=1", key)
		Expect(res.Status).To(Equal(401))
		Expect(res.Problem().Code).To(Equal("unauthenticated"))
		Expect(res.Header.Get("WWW-Authenticate")).To(HavePrefix("Bearer"))

		// One that cached it answers from the cache for at most 30 seconds.
		Expect(clocked.GET("/v1/trips?limit=1", key).Status).To(Equal(200))
		clock.Advance(31 * time.Second)
		Expect(clocked.GET("/v1/trips?limit=1", key).Status).To(Equal(401))
	})
})
