package tests

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server"
	"github.com/rideapi/ride/server/auth"
)

// Every GET of the document, walked through its conditional and content-negotiation cases
// with rate limits on (so that the RateLimit headers are sent too): the plain answer, the
// same request with its ETag in If-None-Match (304, no body, the same ETag), HEAD (the GET's
// status and headers, no body), and an Accept the operation cannot serve (406). Each answer is
// validated by the harness against the document, statuses and headers included, so a status
// or a header the server sends and the document does not declare fails here.
var _ = ForEachEngine("Every GET's conditional and negotiated answers", func(h *Harness) {
	It("are all declared by the document", func() {
		api, _ := h.Replica(server.Config{RateLimitRead: 1000, RateLimitWrite: 1000}, nil)
		admin := api.Key(auth.RoleAdmin, "")

		paid := api.newPayable("completed")
		Expect(api.pay(paid.riderKey, newIdempotencyKey(), paymentOf(paid.trip, "pm_card_visa")).Status).To(Equal(http.StatusCreated))
		estimate := api.NewEstimate(paid.riderKey, api.NewCity(CityOpts{}))
		endpoint, _ := api.RegisterEndpoint("https://partner.example.com/ride/webhooks", "trip.completed")
		event := api.AppendEvent("trip.completed")
		keyID := api.GET("/v1/api-keys?limit=1", admin).JSON()["data"].([]any)[0].(map[string]any)["id"].(string)

		// Each GET path of the document, as a request that is answered 200, and the key to send.
		type get struct{ path, key string }
		gets := map[string]get{
			"/v1/trips":                                     {"/v1/trips?limit=2", admin},
			"/v1/trips/{tripId}":                            {"/v1/trips/" + paid.trip.ID, admin},
			"/v1/trips/{tripId}/updates":                    {"/v1/trips/" + paid.trip.ID + "/updates", paid.riderKey},
			"/v1/trips/{tripId}/payment":                    {"/v1/trips/" + paid.trip.ID + "/payment", paid.riderKey},
			"/v1/drivers/{driverId}":                        {"/v1/drivers/" + paid.driver.ID, paid.riderKey},
			"/v1/drivers/{driverId}/trips":                  {"/v1/drivers/" + paid.driver.ID + "/trips", paid.driverKey},
			"/v1/drivers/{driverId}/availability":           {"/v1/drivers/" + paid.driver.ID + "/availability", paid.driverKey},
			"/v1/riders/{riderId}":                          {"/v1/riders/" + paid.rider.ID, paid.riderKey},
			"/v1/fare-estimates/{estimateId}":               {"/v1/fare-estimates/" + estimate.EstimateId, paid.riderKey},
			"/v1/webhook-endpoints":                         {"/v1/webhook-endpoints", admin},
			"/v1/webhook-endpoints/{endpointId}":            {"/v1/webhook-endpoints/" + endpoint, admin},
			"/v1/webhook-endpoints/{endpointId}/deliveries": {"/v1/webhook-endpoints/" + endpoint + "/deliveries", admin},
			"/v1/webhook_endpoints":                         {"/v1/webhook_endpoints", admin},
			"/v1/webhook_endpoints/{endpointId}":            {"/v1/webhook_endpoints/" + endpoint, admin},
			"/v1/api-keys":                                  {"/v1/api-keys", admin},
			"/v1/api-keys/{keyId}":                          {"/v1/api-keys/" + keyID, admin},
			"/v1/events":                                    {"/v1/events?limit=5", admin},
			"/v1/events/{eventId}":                          {"/v1/events/" + event.ID, admin},
			"/v1/receipts":                                  {"/v1/receipts?trip_id=" + paid.trip.ID, paid.riderKey},
			"/v1/cities":                                    {"/v1/cities", paid.riderKey},
			"/v1/graphql":                                   {"/v1/graphql?query=" + url.QueryEscape("{ driver(id: \""+paid.driver.ID+"\") { id name } }"), paid.riderKey},
			"/v1/openapi.json":                              {"/v1/openapi.json", ""},
			"/v1/openapi.yaml":                              {"/v1/openapi.yaml", ""},
			"/healthz":                                      {"/healthz", ""},
			"/readyz":                                       {"/readyz", ""},
		}

		var walked []string
		for template, item := range validator.doc.Paths.Map() {
			if item.Get == nil {
				continue
			}
			g, ok := gets[template]
			Expect(ok).To(BeTrue(), "GET %s is not walked here: add a request for it", template)
			walked = append(walked, template)

			plain := api.GET(g.path, g.key)
			Expect(plain.Status).To(Equal(http.StatusOK), "GET %s: %s", g.path, plain.Body)
			etag := plain.Header.Get("ETag")
			Expect(etag).To(HavePrefix(`"`), "GET %s carries a strong ETag", g.path)

			// A resource may change between two requests (a key's last_used_at is written in
			// the background): then the answer is the new representation with a new ETag, and
			// the next request with that one is answered 304. A change every request would
			// be a representation that never validates, so three tries decide.
			var same *Response
			for try := 0; try < 3; try++ {
				same = api.Do(Request{Method: http.MethodGet, Path: g.path, Key: g.key, Header: map[string]string{"If-None-Match": etag}})
				if same.Status != http.StatusOK {
					break
				}
				Expect(same.Header.Get("ETag")).NotTo(Equal(etag), "GET %s answers 200 to its own ETag", g.path)
				etag = same.Header.Get("ETag")
			}
			Expect(same.Status).To(Equal(http.StatusNotModified), "GET %s with its ETag: %s", g.path, same.Body)
			Expect(same.Body).To(BeEmpty())
			Expect(same.Header.Get("ETag")).To(Equal(etag))

			head := api.Do(Request{Method: http.MethodHead, Path: g.path, Key: g.key})
			Expect(head.Status).To(Equal(http.StatusOK), "HEAD %s", g.path)
			Expect(head.Body).To(BeEmpty())

			refused := api.Do(Request{Method: http.MethodGet, Path: g.path, Key: g.key, Header: map[string]string{"Accept": "text/csv"}})
			Expect(refused.Status).To(Equal(http.StatusNotAcceptable), "GET %s for text/csv: %s", g.path, refused.Body)
			Expect(refused.Problem().Code).To(Equal("not_acceptable"))
		}
		slices.Sort(walked)
		Expect(walked).To(HaveLen(len(gets)), "every request above is a GET of the document: %s", strings.Join(walked, ", "))
	})
})
