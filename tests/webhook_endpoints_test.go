package tests

import (
	"net/http"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/ride"
)

var _ = ForEachEngine("Webhook endpoints", func(h *Harness) {
	create := func(key string, body any) *Response {
		return h.Do(Request{Method: http.MethodPost, Path: "/v1/webhook-endpoints", Key: key, Body: body})
	}

	It("registers an endpoint, shows its secret once, and lists, reads and deletes it", func() {
		res := create(h.Admin, map[string]any{
			"url": "https://partner.example.com/ride/hooks", "events": []string{"trip.completed", "payment.failed"},
			"description": "Accounting sync",
		})
		Expect(res.Status).To(Equal(http.StatusCreated))
		created := res.JSON()
		id := created["id"].(string)
		Expect(ride.ValidID(ride.PrefixWebhookEndpoint, id)).To(BeTrue())
		Expect(res.Header.Get("Location")).To(Equal("/v1/webhook-endpoints/" + id))
		Expect(created).To(HaveKeyWithValue("url", "https://partner.example.com/ride/hooks"))
		Expect(created).To(HaveKeyWithValue("events", []any{"trip.completed", "payment.failed"}))
		Expect(created).To(HaveKeyWithValue("description", "Accounting sync"))
		Expect(created).To(HaveKeyWithValue("status", "enabled"))
		Expect(created["secret"]).To(MatchRegexp(`^whsec_[A-Za-z0-9+/]{43}=$`))
		DeferCleanup(func() { h.Do(Request{Method: http.MethodDelete, Path: "/v1/webhook-endpoints/" + id, Key: h.Admin}) })

		one := h.GET("/v1/webhook-endpoints/"+id, h.Admin)
		Expect(one.Status).To(Equal(http.StatusOK))
		Expect(one.JSON()).NotTo(HaveKey("secret"))
		Expect(string(one.Body)).NotTo(ContainSubstring(created["secret"].(string)))
		Expect(one.JSON()).To(HaveKeyWithValue("created_at", created["created_at"]))

		list := h.GET("/v1/webhook-endpoints?limit=100", h.Admin)
		Expect(list.Status).To(Equal(http.StatusOK))
		Expect(string(list.Body)).To(ContainSubstring(id))
		Expect(string(list.Body)).NotTo(ContainSubstring("whsec_"))

		del := h.Do(Request{Method: http.MethodDelete, Path: "/v1/webhook-endpoints/" + id, Key: h.Admin})
		Expect(del.Status).To(Equal(http.StatusNoContent))
		Expect(del.Body).To(BeEmpty())
		// Deleting again ends in the same state and says there is nothing to delete.
		again := h.Do(Request{Method: http.MethodDelete, Path: "/v1/webhook-endpoints/" + id, Key: h.Admin})
		Expect(again.Status).To(Equal(http.StatusNotFound))
		Expect(h.GET("/v1/webhook-endpoints/"+id, h.Admin).Status).To(Equal(http.StatusNotFound))
	})

	It("leaves out a description that was not given", func() {
		res := create(h.Admin, map[string]any{"url": "https://partner.example.com/a", "events": []string{"trip.created"}})
		Expect(res.Status).To(Equal(http.StatusCreated))
		Expect(res.JSON()).To(HaveKeyWithValue("description", BeNil()))
		h.Do(Request{Method: http.MethodDelete, Path: "/v1/webhook-endpoints/" + res.JSON()["id"].(string), Key: h.Admin})
	})

	DescribeTable("refuses invalid registrations with 400 naming the member",
		func(body string, location string) {
			res := create(h.Admin, body)
			Expect(res.Status).To(Equal(http.StatusBadRequest), "%s", res.Body)
			p := res.Problem()
			Expect(p.Errors).NotTo(BeNil())
			Expect(*p.Errors).To(ContainElement(HaveField("Location", HavePrefix(location))))
		},
		Entry("no events", `{"url":"https://a.example.com/","events":[]}`, "body.events"),
		Entry("unknown event kind", `{"url":"https://a.example.com/","events":["trip.teleported"]}`, "body.events"),
		Entry("repeated event kind", `{"url":"https://a.example.com/","events":["trip.created","trip.created"]}`, "body.events"),
		Entry("no url", `{"events":["trip.created"]}`, "body"),
		Entry("a relative url", `{"url":"/hooks","events":["trip.created"]}`, "body.url"),
		Entry("an unknown member", `{"url":"https://a.example.com/","events":["trip.created"],"secret":"mine"}`, "body"),
		Entry("a description too long", `{"url":"https://a.example.com/","events":["trip.created"],"description":"`+strings.Repeat("x", 501)+`"}`, "body.description"),
	)

	Context("with insecure webhooks off", func() {
		var secure *Harness
		BeforeEach(func(ctx SpecContext) {
			cfg := testConfig()
			cfg.WebhookInsecure = false
			secure = h.ServerOn(ctx, h.DatabaseURL, cfg, false)
		})

		DescribeTable("refuses URLs that are not https or point at private addresses with 422",
			func(url string) {
				res := secure.Do(Request{Method: http.MethodPost, Path: "/v1/webhook-endpoints", Key: secure.Admin,
					Body: map[string]any{"url": url, "events": []string{"trip.completed"}}})
				Expect(res.Status).To(Equal(http.StatusUnprocessableEntity), "%s", res.Body)
				p := res.Problem()
				Expect(p.Code).To(Equal("invalid_webhook_url"))
				Expect(*p.Errors).To(ContainElement(HaveField("Location", "body.url")))
			},
			Entry("plain http", "http://partner.example.com/hooks"),
			Entry("loopback", "https://127.0.0.1:8443/hooks"),
			Entry("private", "https://10.1.2.3/hooks"),
			Entry("private 192.168", "https://192.168.0.10/hooks"),
			Entry("cloud metadata", "https://169.254.169.254/latest"),
			Entry("IPv6 loopback", "https://[::1]/hooks"),
			Entry("localhost", "https://localhost/hooks"),
		)

		It("accepts a public https URL", func() {
			res := secure.Do(Request{Method: http.MethodPost, Path: "/v1/webhook-endpoints", Key: secure.Admin,
				Body: map[string]any{"url": "https://partner.example.com/hooks", "events": []string{"trip.completed"}}})
			Expect(res.Status).To(Equal(http.StatusCreated))
			secure.Do(Request{Method: http.MethodDelete, Path: "/v1/webhook-endpoints/" + res.JSON()["id"].(string), Key: secure.Admin})
		})
	})

	It("is for admins only: 401 without a key, 403 for riders and drivers", func() {
		id, _ := h.RegisterEndpoint("https://partner.example.com/perm", "trip.completed")
		rider := h.Key(auth.RoleRider, h.NewRider().ID)
		driver := h.Key(auth.RoleDriver, h.NewDriver(DriverOpts{}).ID)
		body := map[string]any{"url": "https://partner.example.com/x", "events": []string{"trip.completed"}}
		calls := []Request{
			{Method: http.MethodPost, Path: "/v1/webhook-endpoints", Body: body},
			{Method: http.MethodGet, Path: "/v1/webhook-endpoints"},
			{Method: http.MethodGet, Path: "/v1/webhook-endpoints/" + id},
			{Method: http.MethodDelete, Path: "/v1/webhook-endpoints/" + id},
			{Method: http.MethodPost, Path: "/v1/webhook-endpoints/" + id + "/secret-rotations", Body: map[string]any{}},
			{Method: http.MethodGet, Path: "/v1/webhook-endpoints/" + id + "/deliveries"},
			{Method: http.MethodPost, Path: "/v1/webhook_endpoints", Body: body},
			{Method: http.MethodGet, Path: "/v1/webhook_endpoints/" + id},
			{Method: http.MethodGet, Path: "/v1/events"},
			{Method: http.MethodGet, Path: "/v1/events/" + ride.NewID(ride.PrefixEvent)},
		}
		for _, c := range calls {
			res := h.Do(c)
			Expect(res.Status).To(Equal(http.StatusUnauthorized), "%s %s", c.Method, c.Path)
			Expect(res.Header.Get("WWW-Authenticate")).To(HavePrefix("Bearer"))
			for _, key := range []string{rider, driver} {
				c.Key = key
				res := h.Do(c)
				Expect(res.Status).To(Equal(http.StatusForbidden), "%s %s", c.Method, c.Path)
				Expect(res.Problem().Code).To(Equal("forbidden"))
			}
			c.Key = ""
		}
		Expect(h.GET("/v1/webhook-endpoints/"+id, h.Admin).Status).To(Equal(http.StatusOK), "still there")
	})

	It("keeps each account's endpoints to itself", func() {
		id, _ := h.RegisterEndpoint("https://partner.example.com/mine", "trip.completed")
		other := h.KeyIn(auth.RoleAdmin, "", "acct_other_"+ride.NewID("x")[2:10])
		Expect(h.GET("/v1/webhook-endpoints/"+id, other).Status).To(Equal(http.StatusNotFound))
		Expect(h.Do(Request{Method: http.MethodDelete, Path: "/v1/webhook-endpoints/" + id, Key: other}).Status).To(Equal(http.StatusNotFound))
		Expect(h.Do(Request{Method: http.MethodPost, Path: "/v1/webhook-endpoints/" + id + "/secret-rotations", Key: other, Body: map[string]any{}}).Status).To(Equal(http.StatusNotFound))
		Expect(h.GET("/v1/webhook-endpoints/"+id+"/deliveries", other).Status).To(Equal(http.StatusNotFound))
		list := h.GET("/v1/webhook-endpoints", other)
		Expect(list.Status).To(Equal(http.StatusOK))
		Expect(string(list.Body)).NotTo(ContainSubstring(id))
	})

	It("answers 404 for unknown and malformed ids", func() {
		for _, id := range []string{ride.NewID(ride.PrefixWebhookEndpoint), "whe_nope", ride.NewID(ride.PrefixTrip), strings.Repeat("w", 300)} {
			Expect(h.GET("/v1/webhook-endpoints/"+id, h.Admin).Status).To(Equal(http.StatusNotFound), id)
			Expect(h.Do(Request{Method: http.MethodDelete, Path: "/v1/webhook-endpoints/" + id, Key: h.Admin}).Status).To(Equal(http.StatusNotFound), id)
		}
	})

	It("pages the list newest first with cursors bound to the account", func() {
		account := "acct_pages_" + ride.NewID("x")[2:10]
		admin := h.KeyIn(auth.RoleAdmin, "", account)
		var ids []string
		for i := 0; i < 5; i++ {
			res := create(admin, map[string]any{"url": "https://partner.example.com/p", "events": []string{"trip.created"}})
			Expect(res.Status).To(Equal(http.StatusCreated))
			ids = append([]string{res.JSON()["id"].(string)}, ids...) // newest first
		}
		var seen []string
		path := "/v1/webhook-endpoints?limit=2"
		var pages []map[string]any
		for {
			res := h.GET(path, admin)
			Expect(res.Status).To(Equal(http.StatusOK))
			page := res.JSON()
			pages = append(pages, page)
			for _, item := range page["data"].([]any) {
				seen = append(seen, item.(map[string]any)["id"].(string))
			}
			p := page["pagination"].(map[string]any)
			Expect(p["count"]).To(BeEquivalentTo(len(page["data"].([]any))))
			if p["next_cursor"] == nil {
				Expect(p["has_more"]).To(BeFalse())
				break
			}
			Expect(p["has_more"]).To(BeTrue())
			path = "/v1/webhook-endpoints?limit=2&cursor=" + p["next_cursor"].(string)
		}
		Expect(seen).To(Equal(ids))
		Expect(pages).To(HaveLen(3))

		// Back from the last page: the two items before it, in the same order.
		prev := pages[2]["pagination"].(map[string]any)["prev_cursor"].(string)
		back := h.GET("/v1/webhook-endpoints?limit=2&cursor="+prev, admin).JSON()
		Expect(back["data"].([]any)[0].(map[string]any)["id"]).To(Equal(ids[2]))
		Expect(back["data"].([]any)[1].(map[string]any)["id"]).To(Equal(ids[3]))

		// Another account's admin cannot use the cursor; neither can the alias be used to mix.
		next := pages[0]["pagination"].(map[string]any)["next_cursor"].(string)
		res := h.GET("/v1/webhook-endpoints?limit=2&cursor="+next, h.Admin)
		Expect(res.Status).To(Equal(http.StatusBadRequest))
		Expect(res.Problem().Code).To(Equal("invalid_cursor"))
		alias := h.GET("/v1/webhook_endpoints?limit=2&cursor="+next, admin)
		Expect(alias.Status).To(Equal(http.StatusOK), "the alias is the same operation, with the same cursors")
		for _, id := range ids {
			h.Do(Request{Method: http.MethodDelete, Path: "/v1/webhook-endpoints/" + id, Key: admin})
		}
	})

	It("rotates the secret: a new secret, the old one signing until the grace period ends", func() {
		id, secret := h.RegisterEndpoint("https://partner.example.com/rotate", "trip.completed")
		res := h.Do(Request{Method: http.MethodPost, Path: "/v1/webhook-endpoints/" + id + "/secret-rotations", Key: h.Admin,
			Body: map[string]any{"grace_period_seconds": 3600}})
		Expect(res.Status).To(Equal(http.StatusCreated))
		Expect(res.Header.Get("Location")).To(Equal("/v1/webhook-endpoints/" + id))
		rotation := res.JSON()
		Expect(rotation["secret"]).To(MatchRegexp(`^whsec_`))
		Expect(rotation["secret"]).NotTo(Equal(secret))
		Expect(rotation["previous_secret_expires_at"]).NotTo(BeEmpty())

		// No body: the default grace period of 24 hours.
		res = h.Do(Request{Method: http.MethodPost, Path: "/v1/webhook-endpoints/" + id + "/secret-rotations", Key: h.Admin})
		Expect(res.Status).To(Equal(http.StatusCreated))

		bad := h.Do(Request{Method: http.MethodPost, Path: "/v1/webhook-endpoints/" + id + "/secret-rotations", Key: h.Admin,
			Body: map[string]any{"grace_period_seconds": -1}})
		Expect(bad.Status).To(Equal(http.StatusBadRequest))
		Expect(h.Do(Request{Method: http.MethodPost, Path: "/v1/webhook-endpoints/" + ride.NewID(ride.PrefixWebhookEndpoint) + "/secret-rotations",
			Key: h.Admin, Body: map[string]any{}}).Status).To(Equal(http.StatusNotFound))
	})

	Describe("the deprecated spelling /v1/webhook_endpoints", func() {
		expectDeprecated := func(res *Response, successor string) {
			GinkgoHelper()
			Expect(res.Header.Get("Deprecation")).To(Equal("@1795219200"), "RFC 9745: the date of the deprecation")
			Expect(res.Header.Get("Sunset")).To(BeEmpty(), "the alias works for the whole of v1")
			Expect(res.Header.Get("Link")).To(Equal("<" + successor + `>; rel="successor-version"`))
		}

		It("runs the same operations and says what replaces it", func() {
			res := h.Do(Request{Method: http.MethodPost, Path: "/v1/webhook_endpoints", Key: h.Admin,
				Body: map[string]any{"url": "https://partner.example.com/old", "events": []string{"trip.completed"}}})
			Expect(res.Status).To(Equal(http.StatusCreated))
			expectDeprecated(res, "/v1/webhook-endpoints")
			id := res.JSON()["id"].(string)
			Expect(res.Header.Get("Location")).To(Equal("/v1/webhook-endpoints/" + id))
			Expect(res.JSON()["secret"]).To(HavePrefix("whsec_"))

			list := h.GET("/v1/webhook_endpoints?limit=100", h.Admin)
			Expect(list.Status).To(Equal(http.StatusOK))
			expectDeprecated(list, "/v1/webhook-endpoints")
			Expect(string(list.Body)).To(ContainSubstring(id))

			one := h.GET("/v1/webhook_endpoints/"+id, h.Admin)
			Expect(one.Status).To(Equal(http.StatusOK))
			expectDeprecated(one, "/v1/webhook-endpoints/"+id)
			Expect(one.Body).To(MatchJSON(h.GET("/v1/webhook-endpoints/"+id, h.Admin).Body))

			del := h.Do(Request{Method: http.MethodDelete, Path: "/v1/webhook_endpoints/" + id, Key: h.Admin})
			Expect(del.Status).To(Equal(http.StatusNoContent))
			expectDeprecated(del, "/v1/webhook-endpoints/"+id)
			Expect(h.GET("/v1/webhook-endpoints/"+id, h.Admin).Status).To(Equal(http.StatusNotFound))
		})

		It("marks its error answers too", func() {
			expectDeprecated(h.GET("/v1/webhook_endpoints", ""), "/v1/webhook-endpoints")
			missing := ride.NewID(ride.PrefixWebhookEndpoint)
			res := h.Do(Request{Method: http.MethodDelete, Path: "/v1/webhook_endpoints/" + missing, Key: h.Admin})
			Expect(res.Status).To(Equal(http.StatusNotFound))
			expectDeprecated(res, "/v1/webhook-endpoints/"+missing)
			Expect(h.GET("/v1/webhook-endpoints", "").Header.Get("Deprecation")).To(BeEmpty(), "only the alias is deprecated")
		})

		It("is documented as deprecated", func() {
			doc := validator.doc
			for _, path := range []string{"/v1/webhook_endpoints", "/v1/webhook_endpoints/{endpointId}"} {
				for method, op := range doc.Paths.Find(path).Operations() {
					Expect(op.Deprecated).To(BeTrue(), "%s %s", method, path)
				}
			}
			for _, op := range doc.Paths.Find("/v1/webhook-endpoints").Operations() {
				Expect(op.Deprecated).To(BeFalse())
			}
			Expect(doc.Paths.Find("/v1/webhook-endpoints").Post.Callbacks).To(HaveKey("event"))
		})
	})
})
