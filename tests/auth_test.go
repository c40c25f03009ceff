package tests

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/store"
)

var _ = ForEachEngine("Revoked API keys", func(h *Harness) {
	It("are refused with 401 within a second, also by a server that has them cached", func() {
		clock := NewFakeClock(time.Now())
		clocked := h.WithClock(clock.Now)
		key := h.Key(auth.RoleAdmin, "")
		Expect(clocked.GET("/v1/trips?limit=1", key).Status).To(Equal(200))

		sum := sha256.Sum256([]byte(key)) // keys are stored as the hex SHA-256 of the secret
		stored, err := h.Store.APIKeyByHash(context.Background(), hex.EncodeToString(sum[:]))
		Expect(err).NotTo(HaveOccurred())
		_, err = h.Store.RevokeAPIKey(context.Background(), store.RevokeAPIKeyParams{
			Account: stored.Account, ID: stored.ID, At: time.Now(),
		})
		Expect(err).NotTo(HaveOccurred())

		// A server that has not seen the key asks the store at once.
		res := h.WithClock(clock.Now).GET("/v1/trips?limit=1", key)
		Expect(res.Status).To(Equal(401))
		Expect(res.Problem().Code).To(Equal("unauthenticated"))
		Expect(res.Header.Get("WWW-Authenticate")).To(HavePrefix("Bearer"))

		// One that cached it refuses it once it has polled the revocation revision.
		Eventually(func() int { return clocked.GET("/v1/trips?limit=1", key).Status }).
			WithTimeout(time.Second).WithPolling(20 * time.Millisecond).Should(Equal(401))
	})
})
