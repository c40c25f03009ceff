package tests

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/rideapi/ride/server/app"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/store/storetest"
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
			{"role": "admin", "subject": rider.ID},
		} {
			ExpectProblem(h.Do(Request{Method: http.MethodPost, Path: "/v1/api-keys", Key: admin, Body: body}),
				http.StatusUnprocessableEntity, "invalid_key_subject")
		}
		ExpectProblem(h.Do(Request{Method: http.MethodPost, Path: "/v1/api-keys", Key: h.Admin,
			Body: map[string]any{"role": "driver", "subject": "drv_nonexistent0000000000000"}}), http.StatusUnprocessableEntity, "invalid_key_subject")
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

	It("look no unknown key up, made-up or well-formed, and a known one once", func() {
		isolated := h.WithClock(time.Now)
		Expect(isolated.GET("/v1/trips?limit=1", h.Admin).Status).To(Equal(http.StatusOK)) // the replica has loaded its keys
		randomPart := func() string {
			var raw [32]byte
			_, _ = rand.Read(raw[:])
			return base64.RawURLEncoding.EncodeToString(raw[:])
		}
		var made []string // the length of our keys, a checksum that does not match
		for range 50 {
			made = append(made, "rk_"+randomPart()+"AAAAAA")
		}
		var wellFormed []string // the form of keys made before the checksum, which still work
		for range 20 {
			wellFormed = append(wellFormed, "rk_"+randomPart())
		}
		// A key made on another replica a moment ago, which this one has never seen.
		other := h.ServerOn(context.Background(), h.DatabaseURL, testConfig(), false)
		res := other.Do(Request{Method: http.MethodPost, Path: "/v1/api-keys", Key: h.Admin, Body: map[string]any{"role": "admin"}})
		Expect(res.Status).To(Equal(http.StatusCreated), "%s", res.Body)
		fresh := res.JSON()["secret"].(string)

		var hashes []string
		for _, k := range slices.Concat(made, wellFormed, []string{fresh}) {
			sum := sha256.Sum256([]byte(k))
			hashes = append(hashes, hex.EncodeToString(sum[:]))
		}
		log := h.watchQueries(hashes...)
		for _, k := range slices.Concat(made, wellFormed, wellFormed) {
			ExpectProblem(isolated.GET("/v1/trips?limit=1", k), http.StatusUnauthorized, "unauthenticated")
		}
		Expect(log.Counts()).To(BeEmpty(), "unknown keys cost no look-up")
		for range 3 {
			Expect(isolated.GET("/v1/trips?limit=1", fresh).Status).To(Equal(http.StatusOK))
		}
		Expect(log.Counts()).To(Equal([]string{"api_keys=1"}), "a new key is read once, then cached")
	})

	It("forget a key once it expires: it costs no look-up, however many an account made", func() {
		clock := NewFakeClock(time.Now())
		a := h.WithClock(clock.Now)
		admin := h.KeyIn(auth.RoleAdmin, "", newAccount("expired"))
		res := a.Do(Request{Method: http.MethodPost, Path: "/v1/api-keys", Key: admin, Body: map[string]any{
			"role": "admin", "expires_at": clock.Now().Add(time.Minute).Format(time.RFC3339Nano),
		}})
		Expect(res.Status).To(Equal(http.StatusCreated), "%s", res.Body)
		secret := res.JSON()["secret"].(string)
		Expect(a.GET("/v1/trips?limit=1", secret).Status).To(Equal(http.StatusOK))
		clock.Advance(2 * time.Minute)

		b := h.WithClock(clock.Now) // a replica that starts after the expiry
		Expect(b.GET("/v1/trips?limit=1", h.Admin).Status).To(Equal(http.StatusOK))
		sum := sha256.Sum256([]byte(secret))
		log := h.watchQueries(hex.EncodeToString(sum[:]))
		for _, on := range []*Harness{a, b, a, b} {
			ExpectProblem(on.GET("/v1/trips?limit=1", secret), http.StatusUnauthorized, "unauthenticated")
		}
		Expect(log.Counts()).To(BeEmpty())
	})

	It("answer a valid key whatever another caller at the same address sent", func() {
		isolated := h.WithClock(time.Now)
		Expect(isolated.GET("/v1/trips?limit=1", h.Admin).Status).To(Equal(http.StatusOK))
		for i := range 300 {
			junk := "rk_" + strings.Repeat("x", 40) + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + "Q"
			ExpectProblem(isolated.GET("/v1/trips?limit=1", junk), http.StatusUnauthorized, "unauthenticated")
		}
		// Keys of any account, never used on this replica, from the address that flooded.
		for _, account := range []string{auth.DefaultAccount, newAccount("flood")} {
			key := h.KeyIn(auth.RoleAdmin, "", account)
			Expect(isolated.GET("/v1/trips?limit=1", key).Status).To(Equal(http.StatusOK))
		}
		_, _, metrics := fetch(isolated, "/metrics")
		Expect(metrics).To(MatchRegexp(`ride_auth_failures_total\{outcome="refused"\} 300\b`))
		Expect(metrics).To(MatchRegexp(`ride_auth_key_lookups_total 3\b`), "the three valid keys, once each")
	})

	It("refuse a request that sends Authorization twice, whichever key comes first", func() {
		account := newAccount("twice")
		a, b := h.KeyIn(auth.RoleAdmin, "", account), h.KeyIn(auth.RoleAdmin, "", account)
		for _, pair := range [][2]string{{a, b}, {a, "nonsense"}, {"nonsense", a}, {a, a}} {
			req, err := http.NewRequest(http.MethodGet, h.URL+"/v1/trips?limit=1", nil)
			Expect(err).NotTo(HaveOccurred())
			req.Header.Add("Authorization", "Bearer "+pair[0])
			req.Header.Add("Authorization", "Bearer "+pair[1])
			res := h.Send(req)
			ExpectProblem(res, http.StatusBadRequest, "invalid_request")
			Expect((*res.Problem().Errors)[0].Location).To(Equal("header.Authorization"))
		}
	})

	It("are at most 1,000 active ones per account: past that, 409 until one is revoked", func(ctx SpecContext) {
		account := newAccount("limit")
		admin := h.KeyIn(auth.RoleAdmin, "", account)
		storetest.CreateAPIKeys(ctx, h.Store, account, app.MaxActiveAPIKeys-2) // with admin, one short of the limit
		create := func() *Response {
			return h.Do(Request{Method: http.MethodPost, Path: "/v1/api-keys", Key: admin, Body: map[string]any{"role": "admin"}})
		}
		last := create()
		Expect(last.Status).To(Equal(http.StatusCreated), "%s", last.Body)
		res := create()
		ExpectProblem(res, http.StatusConflict, "api_key_limit_reached")
		Expect(*res.Problem().Detail).To(ContainSubstring("1000 active API keys"))
		_, _, err := app.NewAPIKey(ctx, h.Store, app.APIKeyParams{Role: auth.RoleAdmin, Account: account}, time.Now())
		Expect(err).To(HaveOccurred(), "the command line meets the same limit")

		Expect(h.Do(Request{Method: http.MethodDelete, Path: "/v1/api-keys/" + last.JSON()["id"].(string), Key: admin}).Status).To(Equal(http.StatusNoContent))
		Expect(create().Status).To(Equal(http.StatusCreated))
	})
})
