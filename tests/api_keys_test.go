package tests

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/rideapi/ride/server/auth"
)

var _ = ForEachEngine("API keys", func(h *Harness) {
	It("let an admin manage the account's keys: created with the secret once, listed, revoked at once", func() {
		account := newAccount("keys")
		admin := h.KeyIn(auth.RoleAdmin, "", account)
		rider := h.NewRiderIn(account)
		expires := time.Now().Add(time.Hour).UTC().Truncate(time.Second)

		res := h.Do(Request{Method: http.MethodPost, Path: "/v1/api-keys", Key: admin, Body: map[string]any{
			"role": "rider", "subject": rider.ID, "description": "checkout", "expires_at": expires.Format(time.RFC3339),
		}})
		Expect(res.Status).To(Equal(http.StatusCreated), "%s", res.Body)
		created := res.JSON()
		secret, id := created["secret"].(string), created["id"].(string)
		Expect(res.Header.Get("Location")).To(Equal("/v1/api-keys/" + id))
		Expect(created["account"]).To(Equal(account))
		Expect(created["prefix"]).To(Equal(secret[:11]))
		Expect(created["expires_at"]).To(Equal(expires.Format(time.RFC3339)))
		Expect(h.GET("/v1/trips?limit=1", secret).Status).To(Equal(http.StatusOK))

		got := h.GET("/v1/api-keys/"+id, admin)
		Expect(got.Status).To(Equal(http.StatusOK))
		Expect(string(got.Body)).NotTo(ContainSubstring(secret))
		Expect(got.JSON()).NotTo(HaveKey("secret"))
		Eventually(func() any { return h.GET("/v1/api-keys/"+id, admin).JSON()["last_used_at"] }).
			WithTimeout(5 * time.Second).ShouldNot(BeNil())
		listed := h.GET("/v1/api-keys?limit=100", admin)
		Expect(ids(listed)).To(ContainElement(id))
		Expect(string(listed.Body)).NotTo(ContainSubstring(secret))

		Expect(h.Do(Request{Method: http.MethodDelete, Path: "/v1/api-keys/" + id, Key: admin}).Status).To(Equal(http.StatusNoContent))
		ExpectProblem(h.GET("/v1/trips?limit=1", secret), http.StatusUnauthorized, "unauthenticated")
		Expect(h.GET("/v1/api-keys/"+id, admin).JSON()["revoked_at"]).NotTo(BeNil())
		Expect(h.Do(Request{Method: http.MethodDelete, Path: "/v1/api-keys/" + id, Key: admin}).Status).To(Equal(http.StatusNoContent))

		// Only admins manage keys; a subject must exist in the account; expiry lies ahead.
		riderKey := h.KeyIn(auth.RoleRider, rider.ID, account)
		ExpectProblem(h.GET("/v1/api-keys", riderKey), http.StatusForbidden, "forbidden")
		for _, body := range []map[string]any{
			{"role": "rider"},
			{"role": "rider", "subject": "rdr_nonexistent0000000000000"},
			{"role": "driver", "subject": "drv_nonexistent0000000000000"},
			{"role": "admin", "subject": rider.ID},
		} {
			ExpectProblem(h.Do(Request{Method: http.MethodPost, Path: "/v1/api-keys", Key: admin, Body: body}),
				http.StatusUnprocessableEntity, "invalid_key_subject")
		}
		ExpectProblem(h.Do(Request{Method: http.MethodPost, Path: "/v1/api-keys", Key: admin,
			Body: map[string]any{"role": "admin", "expires_at": "2001-01-01T00:00:00Z"}}), http.StatusUnprocessableEntity, "invalid_key_expiry")
		ExpectProblem(h.Do(Request{Method: http.MethodPost, Path: "/v1/api-keys", Key: admin,
			Body: map[string]any{"role": "pilot"}}), http.StatusBadRequest, "invalid_request")
	})

	It("refuse an expired key like a revoked one", func() {
		clock := NewFakeClock(time.Now())
		clocked := h.WithClock(clock.Now)
		account := newAccount("expiry")
		admin := h.KeyIn(auth.RoleAdmin, "", account)
		res := clocked.Do(Request{Method: http.MethodPost, Path: "/v1/api-keys", Key: admin, Body: map[string]any{
			"role": "admin", "expires_at": clock.Now().Add(time.Minute).Format(time.RFC3339Nano),
		}})
		Expect(res.Status).To(Equal(http.StatusCreated), "%s", res.Body)
		secret := res.JSON()["secret"].(string)
		Expect(clocked.GET("/v1/trips?limit=1", secret).Status).To(Equal(http.StatusOK))
		clock.Advance(61 * time.Second)
		res = clocked.GET("/v1/trips?limit=1", secret)
		ExpectProblem(res, http.StatusUnauthorized, "unauthenticated")
		Expect(*res.Problem().Detail).To(ContainSubstring("expired"))
	})

	It("are refused on another replica within a second of a revocation through the API", func(ctx SpecContext) {
		account := newAccount("revoke")
		admin := h.KeyIn(auth.RoleAdmin, "", account)
		res := h.Do(Request{Method: http.MethodPost, Path: "/v1/api-keys", Key: admin, Body: map[string]any{"role": "admin"}})
		Expect(res.Status).To(Equal(http.StatusCreated))
		secret, id := res.JSON()["secret"].(string), res.JSON()["id"].(string)

		// A replica with a store (a connection pool) of its own, which has the key cached.
		replica := h.ServerOn(ctx, h.DatabaseURL, testConfig(), false)
		for range 3 {
			Expect(replica.GET("/v1/trips?limit=1", secret).Status).To(Equal(http.StatusOK))
		}
		revoked := time.Now()
		Expect(h.Do(Request{Method: http.MethodDelete, Path: "/v1/api-keys/" + id, Key: admin}).Status).To(Equal(http.StatusNoContent))
		Eventually(func() int { return replica.GET("/v1/trips?limit=1", secret).Status }).
			WithTimeout(time.Second).WithPolling(20 * time.Millisecond).Should(Equal(http.StatusUnauthorized))
		GinkgoWriter.Printf("revoked key refused by the other replica after %v\n", time.Since(revoked))
	})

	It("look an unknown key up once, and a made-up one never", func() {
		isolated := h.WithClock(time.Now)
		randomPart := func() string {
			var raw [32]byte
			_, _ = rand.Read(raw[:])
			return base64.RawURLEncoding.EncodeToString(raw[:])
		}
		var made []string // the length of our keys, a checksum that does not match
		for range 50 {
			made = append(made, "rk_"+randomPart()+"AAAAAA")
		}
		unknown := "rk_" + randomPart() // the form of keys made before the checksum
		var hashes []string
		for _, k := range append(slices.Clone(made), unknown) {
			sum := sha256.Sum256([]byte(k))
			hashes = append(hashes, hex.EncodeToString(sum[:]))
		}
		log := h.watchQueries(hashes...)
		for _, k := range made {
			ExpectProblem(isolated.GET("/v1/trips?limit=1", k), http.StatusUnauthorized, "unauthenticated")
		}
		for range 20 {
			ExpectProblem(isolated.GET("/v1/trips?limit=1", unknown), http.StatusUnauthorized, "unauthenticated")
		}
		Expect(log.Counts()).To(Equal([]string{"api_keys=1"}))
	})

	It("answer a client that keeps sending unknown keys 429 before looking them up", func() {
		// A server of its own, so the budget of 127.0.0.1 on the shared one stays whole, on a
		// clock that stands still, so the bucket does not refill however slow the run.
		isolated := h.WithClock(NewFakeClock(time.Now()).Now)
		Expect(isolated.GET("/v1/trips?limit=1", h.Admin).Status).To(Equal(http.StatusOK))
		var statuses []int
		for i := range 200 {
			junk := "rk_" + strings.Repeat("x", 40) + string(rune('a'+i%26)) + string(rune('a'+i/26)) + "Q"
			statuses = append(statuses, isolated.GET("/v1/trips?limit=1", junk).Status)
			if statuses[len(statuses)-1] == http.StatusTooManyRequests {
				break
			}
		}
		Expect(statuses).To(ContainElement(http.StatusTooManyRequests))
		Expect(statuses[0]).To(Equal(http.StatusUnauthorized))
		_, _, metrics := fetch(isolated, "/metrics")
		Expect(metrics).To(MatchRegexp(`ride_auth_failures_total\{outcome="refused"\} 100\b`))
		Expect(metrics).To(MatchRegexp(`ride_auth_failures_total\{outcome="throttled"\} 1\b`))
		// A key it knows still works from the same address: only lookups are withheld.
		Expect(isolated.GET("/v1/trips?limit=1", h.Admin).Status).To(Equal(http.StatusOK))
	})
})
