package tests

import (
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/ride"
)

// tenantA is one account's data, made through the API as that account's apps would make it.
type tenantA struct {
	account                      string
	admin, rider                 string // keys
	riderID                      string
	driverKey                    string // the driver of both trips (the shared fleet)
	completed, active            string // trip ids
	estimate                     string // an estimate not booked yet
	endpoint, keyID              string
	receiver                     *Receiver
	completedEvent, activeEvents []string
}

// newAccount is an account id of its own for one spec.
func newAccount(name string) string {
	return "acct_" + name + "_" + strings.ToLower(ride.NewID("x")[2:12])
}

// ids lists the ids of a list answer's items.
func ids(res *Response) []string {
	GinkgoHelper()
	Expect(res.Status).To(Equal(http.StatusOK), "%s", res.Body)
	var page struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	res.Decode(&page)
	out := make([]string, len(page.Data))
	for i, item := range page.Data {
		out[i] = item.ID
	}
	return out
}

// seedTenantA books, completes and leaves active a trip of a rider of a fresh account, with an
// estimate, a webhook endpoint on a real receiver and an API key, all through the API.
func seedTenantA(h *Harness) tenantA {
	GinkgoHelper()
	a := tenantA{account: newAccount("a")}
	city := h.NewCity(CityOpts{})
	h.NewDriver(DriverOpts{City: city.ID})
	rider := h.NewRiderIn(a.account)
	a.riderID = rider.ID
	a.admin = h.KeyIn(auth.RoleAdmin, "", a.account)
	a.rider = h.KeyIn(auth.RoleRider, rider.ID, a.account)

	a.receiver = NewReceiver(nil)
	res := h.Do(Request{Method: http.MethodPost, Path: "/v1/webhook-endpoints", Key: a.admin, Body: map[string]any{
		"url": a.receiver.URL, "events": []string{"trip.created", "trip.started", "trip.completed", "payment.succeeded"},
	}})
	Expect(res.Status).To(Equal(http.StatusCreated), "%s", res.Body)
	a.endpoint = res.JSON()["id"].(string)
	DeferCleanup(func() {
		h.Do(Request{Method: http.MethodDelete, Path: "/v1/webhook-endpoints/" + a.endpoint, Key: a.admin})
	})

	done := h.BookTrip(a.rider, h.NewEstimate(a.rider, city).EstimateId)
	a.completed = done.Id
	a.driverKey = h.Key(auth.RoleDriver, done.DriverSummary.Id)
	Expect(h.PutStatus(a.driverKey, done.Id, "in_progress", nil).Status).To(Equal(http.StatusOK))
	Expect(h.PutStatus(a.driverKey, done.Id, "completed", nil).Status).To(Equal(http.StatusOK))
	a.active = h.BookTrip(a.rider, h.NewEstimate(a.rider, city).EstimateId).Id
	a.estimate = h.NewEstimate(a.rider, city).EstimateId

	res = h.Do(Request{Method: http.MethodPost, Path: "/v1/api-keys", Key: a.admin,
		Body: map[string]any{"role": "rider", "subject": rider.ID, "description": "tenant A's app"}})
	Expect(res.Status).To(Equal(http.StatusCreated), "%s", res.Body)
	a.keyID = res.JSON()["id"].(string)

	a.completedEvent = h.eventIDsOf(a.admin, a.completed)
	a.activeEvents = h.eventIDsOf(a.admin, a.active)
	Expect(a.completedEvent).NotTo(BeEmpty())
	return a
}

// eventIDsOf lists, as key, the ids of the events about one trip.
func (h *Harness) eventIDsOf(key, tripID string) []string {
	GinkgoHelper()
	res := h.GET("/v1/events?limit=100", key)
	Expect(res.Status).To(Equal(http.StatusOK), "%s", res.Body)
	var page struct {
		Data []struct {
			ID   string         `json:"id"`
			Data map[string]any `json:"data"`
		} `json:"data"`
	}
	res.Decode(&page)
	var out []string
	for _, e := range page.Data {
		if e.Data["trip_id"] == tripID {
			out = append(out, e.ID)
		}
	}
	return out
}

var _ = ForEachEngine("Accounts", func(h *Harness) {
	It("confine every operation of the document to the caller's account, drivers to the trips they drive", func() {
		a := seedTenantA(h)
		accountB := newAccount("b")
		adminB := h.KeyIn(auth.RoleAdmin, "", accountB)
		riderB := h.NewRiderIn(accountB)
		riderBKey := h.KeyIn(auth.RoleRider, riderB.ID, accountB)
		// A driver of the fleet who drives none of A's trips.
		driverB := h.Key(auth.RoleDriver, h.NewDriver(DriverOpts{}).ID)
		receiverB := NewReceiver(nil)
		bKeys := []string{adminB, riderBKey}
		outsiders := []string{adminB, riderBKey, driverB}
		aTrips := []string{a.completed, a.active}
		nonAdmins := []string{riderBKey, driverB}

		notFound := func(res *Response) {
			GinkgoHelper()
			ExpectProblem(res, http.StatusNotFound, "not_found")
		}
		// refused is an answer that tells nothing of A: 403 for a role that may not ask at all,
		// 404 for what does not exist for the caller.
		refused := func(res *Response) {
			GinkgoHelper()
			Expect(res.Status).To(BeElementOf(http.StatusForbidden, http.StatusNotFound), "%s", res.Body)
			Expect(res.Header.Get("Content-Type")).To(Equal("application/problem+json"))
		}
		activeStatus := func() string {
			GinkgoHelper()
			res := h.GET("/v1/trips/"+a.active, a.admin)
			Expect(res.Status).To(Equal(http.StatusOK))
			return res.JSON()["status"].(string)
		}
		endpointPath := "/v1/webhook-endpoints/" + a.endpoint
		var endpointB string

		// Every operation of the document, and what another account's keys get from it. The
		// steps run in this order; payments come before tenant A pays its trip.
		steps := []struct {
			op  string
			run func()
		}{
			{"listTrips", func() {
				for _, key := range outsiders {
					Expect(ids(h.GET("/v1/trips?limit=100", key))).NotTo(ContainElements(a.completed))
					Expect(ids(h.GET("/v1/trips?limit=100", key))).NotTo(ContainElement(a.active))
				}
				Expect(ids(h.GET("/v1/trips?limit=100", a.admin))).To(ContainElements(aTrips))
				// A cursor issued in one account is refused in another.
				page := h.GET("/v1/trips?limit=1", a.admin).JSON()["pagination"].(map[string]any)
				cursor := page["next_cursor"].(string)
				ExpectProblem(h.GET("/v1/trips?limit=1&cursor="+url.QueryEscape(cursor), adminB), http.StatusBadRequest, "invalid_cursor")
			}},
			{"getTrip", func() {
				for _, key := range outsiders {
					for _, id := range aTrips {
						notFound(h.GET("/v1/trips/"+id, key))
					}
				}
				// A driver of the fleet sees the trip it drives, whatever its account.
				Expect(h.GET("/v1/trips/"+a.active, a.driverKey).Status).To(Equal(http.StatusOK))
			}},
			{"updateTrip", func() {
				for _, key := range outsiders {
					refused(h.PutStatus(key, a.active, "arriving", nil))
				}
				notFound(h.PutStatus(adminB, a.active, "arriving", nil))
				notFound(h.PutStatus(driverB, a.active, "arriving", nil))
				Expect(activeStatus()).To(Equal("accepted"))
			}},
			{"createTripCancellation", func() {
				for _, key := range outsiders {
					notFound(h.Cancel(key, a.active, "not mine"))
				}
				Expect(activeStatus()).To(Equal("accepted"))
			}},
			{"getDriver", func() {
				// The fleet's public profiles are readable by every authenticated caller, and
				// carry nothing of any account.
				driverID := h.GET("/v1/trips/"+a.active, a.admin).JSON()["driver_summary"].(map[string]any)["id"].(string)
				for _, key := range outsiders {
					res := h.GET("/v1/drivers/"+driverID, key)
					Expect(res.Status).To(Equal(http.StatusOK))
					Expect(res.JSON()).To(HaveKeyWithValue("id", driverID))
					Expect(res.JSON()).NotTo(HaveKey("active_trip_id"))
					Expect(res.JSON()).NotTo(HaveKey("position"))
				}
			}},
			{"listDriverTrips", func() {
				driverID := h.GET("/v1/trips/"+a.active, a.admin).JSON()["driver_summary"].(map[string]any)["id"].(string)
				Expect(ids(h.GET("/v1/drivers/"+driverID+"/trips?limit=100", adminB))).To(BeEmpty())
				refused(h.GET("/v1/drivers/"+driverID+"/trips?limit=100", riderBKey))
				refused(h.GET("/v1/drivers/"+driverID+"/trips?limit=100", driverB))
				Expect(ids(h.GET("/v1/drivers/"+driverID+"/trips?limit=100", a.admin))).To(ContainElements(aTrips))
				Expect(ids(h.GET("/v1/drivers/"+driverID+"/trips?limit=100", a.driverKey))).To(ContainElements(aTrips))
			}},
			{"getDriverAvailability", func() {
				// The fleet is the platform's: another account's admin sees a driver's public
				// profile only, never the active trip (A's) or the position (A's rider's pickup).
				driverID := h.GET("/v1/trips/"+a.active, a.admin).JSON()["driver_summary"].(map[string]any)["id"].(string)
				for _, key := range append(outsiders, a.admin) {
					ExpectProblem(h.GET("/v1/drivers/"+driverID+"/availability", key), http.StatusForbidden, "forbidden")
				}
				Expect(h.GET("/v1/drivers/"+driverID+"/availability", a.driverKey).JSON()["active_trip_id"]).To(Equal(a.active))
				Expect(h.GET("/v1/drivers/"+driverID+"/availability", h.Admin).JSON()["active_trip_id"]).To(Equal(a.active),
					"the platform's admins administer the fleet")
			}},
			{"setDriverAvailability", func() {
				driverID := h.GET("/v1/trips/"+a.active, a.admin).JSON()["driver_summary"].(map[string]any)["id"].(string)
				for _, key := range append(outsiders, a.admin) {
					res := h.Do(Request{Method: http.MethodPut, Path: "/v1/drivers/" + driverID + "/availability", Key: key,
						Body: map[string]any{"status": "offline"}})
					ExpectProblem(res, http.StatusForbidden, "forbidden")
				}
				Expect(h.GET("/v1/drivers/"+driverID+"/availability", a.driverKey).JSON()["status"]).To(Equal("online"))
			}},
			{"reportDriverPositions", func() {
				driverID := h.GET("/v1/trips/"+a.active, a.admin).JSON()["driver_summary"].(map[string]any)["id"].(string)
				for _, key := range outsiders {
					res := h.Do(Request{Method: http.MethodPost, Path: "/v1/drivers/" + driverID + "/positions", Key: key,
						Body: map[string]any{"positions": []map[string]any{{"lat": 1, "lng": 1, "recorded_at": time.Now().UTC()}}}})
					ExpectProblem(res, http.StatusForbidden, "forbidden")
				}
			}},
			{"streamTripUpdates", func() {
				for _, key := range outsiders {
					for _, id := range aTrips {
						notFound(h.GET("/v1/trips/"+id+"/updates", key))
					}
				}
			}},
			{"listCities", func() {
				// The served cities are the service's, the same for every account.
				Expect(h.GET("/v1/cities", adminB).JSON()["data"]).To(Equal(h.GET("/v1/cities", a.admin).JSON()["data"]))
			}},
			{"getRider", func() {
				notFound(h.GET("/v1/riders/"+a.riderID, adminB))
				refused(h.GET("/v1/riders/"+a.riderID, riderBKey))
				refused(h.GET("/v1/riders/"+a.riderID, driverB))
				Expect(h.GET("/v1/riders/"+a.riderID, a.admin).Status).To(Equal(http.StatusOK))
			}},
			{"createWebhookEndpoint", func() {
				res := h.Do(Request{Method: http.MethodPost, Path: "/v1/webhook-endpoints", Key: adminB, Body: map[string]any{
					"url": receiverB.URL, "events": []string{"trip.created", "trip.arriving", "trip.started", "trip.completed",
						"trip.cancelled", "payment.succeeded", "payment.failed"},
				}})
				Expect(res.Status).To(Equal(http.StatusCreated), "%s", res.Body)
				endpointB = res.JSON()["id"].(string)
				DeferCleanup(func() {
					h.Do(Request{Method: http.MethodDelete, Path: "/v1/webhook-endpoints/" + endpointB, Key: adminB})
				})
			}},
			{"listWebhookEndpoints", func() {
				Expect(ids(h.GET("/v1/webhook-endpoints?limit=100", adminB))).To(Equal([]string{endpointB}))
			}},
			{"getWebhookEndpoint", func() {
				notFound(h.GET(endpointPath, adminB))
				for _, key := range nonAdmins {
					refused(h.GET(endpointPath, key))
					refused(h.GET("/v1/webhook-endpoints", key))
				}
			}},
			{"updateWebhookEndpoint", func() {
				notFound(h.Do(Request{Method: http.MethodPatch, Path: endpointPath, Key: adminB, Body: map[string]any{"status": "disabled"}}))
				Expect(h.GET(endpointPath, a.admin).JSON()["status"]).To(Equal("enabled"))
			}},
			{"rotateWebhookEndpointSecret", func() {
				notFound(h.Do(Request{Method: http.MethodPost, Path: endpointPath + "/secret-rotations", Key: adminB}))
			}},
			{"listWebhookDeliveries", func() {
				notFound(h.GET(endpointPath+"/deliveries", adminB))
				for _, key := range nonAdmins {
					refused(h.GET(endpointPath+"/deliveries", key))
				}
			}},
			{"testWebhookEndpoint", func() {
				notFound(h.Do(Request{Method: http.MethodPost, Path: endpointPath + "/tests", Key: adminB}))
			}},
			{"receivePing", func() {
				// B's ping reaches B's receiver only.
				res := h.Do(Request{Method: http.MethodPost, Path: "/v1/webhook-endpoints/" + endpointB + "/tests", Key: adminB})
				Expect(res.JSON()["delivered"]).To(BeTrue())
				pingID := res.JSON()["event_id"].(string)
				Expect(receiverB.CallsFor(pingID)).To(HaveLen(1))
				Expect(a.receiver.CallsFor(pingID)).To(BeEmpty())
			}},
			{"createWebhookRedelivery", func() {
				// Neither A's endpoint nor A's events exist for B.
				notFound(h.Do(Request{Method: http.MethodPost, Path: endpointPath + "/redeliveries", Key: adminB,
					Body: map[string]any{"event_id": "evt_nosuchevent00000000000000"}}))
				for _, eventID := range h.eventIDsOf(a.admin, a.completed) {
					ExpectProblem(h.Do(Request{Method: http.MethodPost, Path: "/v1/webhook-endpoints/" + endpointB + "/redeliveries",
						Key: adminB, Body: map[string]any{"event_id": eventID}}), http.StatusUnprocessableEntity, "event_not_found")
				}
			}},
			{"deleteWebhookEndpoint", func() {
				notFound(h.Do(Request{Method: http.MethodDelete, Path: endpointPath, Key: adminB}))
				Expect(h.GET(endpointPath, a.admin).Status).To(Equal(http.StatusOK))
			}},
			{"createWebhookEndpointDeprecated", func() {
				res := h.Do(Request{Method: http.MethodPost, Path: "/v1/webhook_endpoints", Key: adminB,
					Body: map[string]any{"url": receiverB.URL, "events": []string{"trip.completed"}}})
				Expect(res.Status).To(Equal(http.StatusCreated), "%s", res.Body)
				id := res.JSON()["id"].(string)
				Expect(ids(h.GET("/v1/webhook-endpoints?limit=100", a.admin))).NotTo(ContainElement(id))
				Expect(h.Do(Request{Method: http.MethodDelete, Path: "/v1/webhook_endpoints/" + id, Key: adminB}).Status).To(Equal(http.StatusNoContent))
			}},
			{"listWebhookEndpointsDeprecated", func() {
				Expect(ids(h.GET("/v1/webhook_endpoints?limit=100", adminB))).NotTo(ContainElement(a.endpoint))
			}},
			{"getWebhookEndpointDeprecated", func() { notFound(h.GET("/v1/webhook_endpoints/"+a.endpoint, adminB)) }},
			{"deleteWebhookEndpointDeprecated", func() {
				notFound(h.Do(Request{Method: http.MethodDelete, Path: "/v1/webhook_endpoints/" + a.endpoint, Key: adminB}))
				Expect(h.GET(endpointPath, a.admin).Status).To(Equal(http.StatusOK))
			}},
			{"createApiKey", func() {
				// A rider of another account cannot be a subject; the key would act across.
				res := h.Do(Request{Method: http.MethodPost, Path: "/v1/api-keys", Key: adminB,
					Body: map[string]any{"role": "rider", "subject": a.riderID}})
				ExpectProblem(res, http.StatusUnprocessableEntity, "invalid_key_subject")
				Expect(res.Problem().Errors).NotTo(BeNil())
				Expect((*res.Problem().Errors)[0].Location).To(Equal("body.subject"))
				// Nor may it give itself a driver of the fleet, who would see the trips they
				// drive for every account: driver keys are the platform's to create.
				driverID := h.GET("/v1/trips/"+a.active, a.admin).JSON()["driver_summary"].(map[string]any)["id"].(string)
				for _, key := range []string{adminB, a.admin} {
					ExpectProblem(h.Do(Request{Method: http.MethodPost, Path: "/v1/api-keys", Key: key,
						Body: map[string]any{"role": "driver", "subject": driverID}}), http.StatusForbidden, "forbidden")
				}
				for _, key := range nonAdmins {
					refused(h.Do(Request{Method: http.MethodPost, Path: "/v1/api-keys", Key: key, Body: map[string]any{"role": "admin"}}))
				}
			}},
			{"listApiKeys", func() {
				Expect(ids(h.GET("/v1/api-keys?limit=100", adminB))).NotTo(ContainElement(a.keyID))
				Expect(ids(h.GET("/v1/api-keys?limit=100", a.admin))).To(ContainElement(a.keyID))
			}},
			{"getApiKey", func() { notFound(h.GET("/v1/api-keys/"+a.keyID, adminB)) }},
			{"revokeApiKey", func() {
				notFound(h.Do(Request{Method: http.MethodDelete, Path: "/v1/api-keys/" + a.keyID, Key: adminB}))
				Expect(h.GET("/v1/api-keys/"+a.keyID, a.admin).JSON()["revoked_at"]).To(BeNil())
			}},
			{"listEvents", func() {
				res := h.GET("/v1/events?limit=100", adminB)
				Expect(res.Status).To(Equal(http.StatusOK))
				for _, id := range aTrips {
					Expect(string(res.Body)).NotTo(ContainSubstring(id))
				}
				for _, key := range nonAdmins {
					refused(h.GET("/v1/events?limit=100", key))
				}
			}},
			{"getEvent", func() {
				for _, id := range append(a.completedEvent, a.activeEvents...) {
					notFound(h.GET("/v1/events/"+id, adminB))
					for _, key := range nonAdmins {
						refused(h.GET("/v1/events/"+id, key))
					}
					Expect(h.GET("/v1/events/"+id, a.admin).Status).To(Equal(http.StatusOK))
				}
			}},
			{"createPayment", func() {
				body := map[string]any{"trip_id": a.completed, "amount": 1, "currency": "usd", "payment_method": "pm_card_visa"}
				fare := h.GET("/v1/trips/"+a.completed, a.admin).JSON()["fare"].(map[string]any)
				body["amount"], body["currency"] = fare["total"], fare["currency"]
				for _, key := range bKeys {
					ExpectProblem(h.pay(key, newIdempotencyKey(), body), http.StatusUnprocessableEntity, "trip_not_found")
				}
				Expect(h.pay(driverB, newIdempotencyKey(), body).Status).To(BeElementOf(http.StatusForbidden, http.StatusUnprocessableEntity))
				Expect(h.pay(a.rider, newIdempotencyKey(), body).Status).To(Equal(http.StatusCreated))
			}},
			{"getTripPayment", func() {
				for _, key := range bKeys {
					notFound(h.GET("/v1/trips/"+a.completed+"/payment", key))
				}
				refused(h.GET("/v1/trips/"+a.completed+"/payment", driverB))
				Expect(h.GET("/v1/trips/"+a.completed+"/payment", a.rider).Status).To(Equal(http.StatusOK))
			}},
			{"listReceipts", func() {
				Expect(ids(h.GET("/v1/receipts?trip_id="+a.completed, adminB))).To(BeEmpty())
				ExpectProblem(h.GET("/v1/receipts?trip_id="+a.completed, riderBKey), http.StatusForbidden, "forbidden")
				refused(h.GET("/v1/receipts?trip_id="+a.completed, driverB))
				Expect(ids(h.GET("/v1/receipts?trip_id="+a.completed, a.rider))).To(HaveLen(1))
			}},
			{"executeGraphQL", func() {
				for _, key := range outsiders {
					ans := h.Query(key, `query($id: ID!) { trip(id: $id) { id status } }`, map[string]any{"id": a.active})
					Expect(ans.Errors).To(BeEmpty())
					Expect(ans.Data).To(HaveKeyWithValue("trip", BeNil()))
				}
				ans := h.Query(a.admin, `query($id: ID!) { trip(id: $id) { id } }`, map[string]any{"id": a.active})
				Expect(ans.Data["trip"]).To(HaveKeyWithValue("id", a.active))
			}},
			{"queryGraphQL", func() {
				res := h.GQLGet(adminB, map[string]string{"query": `{ trip(id: "` + a.completed + `") { id fare { total } } }`})
				Expect(res.Status).To(Equal(http.StatusOK))
				Expect(gqlDecode(res).Data).To(HaveKeyWithValue("trip", BeNil()))
			}},
			{"getFareEstimate", func() {
				for _, key := range outsiders {
					notFound(h.GET("/v1/fare-estimates/"+a.estimate, key))
				}
			}},
			{"createFareEstimate", func() {
				// B's estimate is B's: tenant A's admin does not see it.
				city := h.NewCity(CityOpts{})
				est := h.NewEstimate(adminB, city)
				notFound(h.GET("/v1/fare-estimates/"+est.EstimateId, a.admin))
				// Nor can B's admin book it for A's rider.
				ExpectProblem(h.Book(adminB, map[string]any{"estimate_id": est.EstimateId, "rider_id": a.riderID}),
					http.StatusUnprocessableEntity, "rider_not_found")
			}},
			{"createRide", func() {
				ExpectProblem(h.Book(riderBKey, map[string]any{"estimate_id": a.estimate}), http.StatusUnprocessableEntity, "estimate_not_found")
				ExpectProblem(h.Book(adminB, map[string]any{"estimate_id": a.estimate, "rider_id": riderB.ID}),
					http.StatusUnprocessableEntity, "estimate_not_found")
				Expect(h.GET("/v1/fare-estimates/"+a.estimate, a.rider).JSON()["status"]).To(Equal("valid"))
			}},
			// The published documents and the probes hold no account's data.
			{"getOpenApiJson", func() { Expect(h.GET("/v1/openapi.json", "").Status).To(Equal(http.StatusOK)) }},
			{"getOpenApiYaml", func() { Expect(h.GET("/v1/openapi.yaml", "").Status).To(Equal(http.StatusOK)) }},
			{"getHealth", func() { Expect(h.GET("/healthz", "").Status).To(Equal(http.StatusOK)) }},
			{"getReadiness", func() { Expect(h.GET("/readyz", "").Status).To(Equal(http.StatusOK)) }},
			{"receiveEvent", func() {
				// Tenant A's receiver gets A's events, B's receiver none of them, though B
				// subscribed to every kind: an event goes to the endpoints of its own account.
				Eventually(func() []Call { return a.receiver.CallsFor(a.completedEvent[len(a.completedEvent)-1]) }).
					WithTimeout(10 * time.Second).ShouldNot(BeEmpty())
				paid := h.eventIDsOf(a.admin, a.completed)
				Eventually(func() int { return len(a.receiver.CallsFor(paid[0])) }).WithTimeout(10 * time.Second).Should(Equal(1))
				Consistently(func() []Call {
					var leaked []Call
					for _, c := range receiverB.Calls() {
						for _, id := range aTrips {
							if strings.Contains(string(c.Body), id) {
								leaked = append(leaked, c)
							}
						}
					}
					return leaked
				}).WithTimeout(time.Second).Should(BeEmpty())
				Expect(h.GET("/v1/webhook-endpoints/"+endpointB+"/deliveries", adminB).JSON()["data"]).To(BeEmpty())
			}},
		}

		walked := map[string]bool{}
		for _, step := range steps {
			By(step.op)
			step.run()
			walked[strings.ToLower(step.op)] = true
		}
		var missed []string
		for _, op := range documentOperations() {
			if !walked[strings.ToLower(op)] {
				missed = append(missed, op)
			}
		}
		Expect(missed).To(BeEmpty(), "operations of openapi/ride.yaml the tenancy walk does not cover")
	})

})

// documentOperations lists the operationIds of openapi/ride.yaml, callbacks included.
func documentOperations() []string {
	var out []string
	for _, item := range validator.doc.Paths.Map() {
		for _, op := range item.Operations() {
			out = append(out, op.OperationID)
			for _, cb := range op.Callbacks {
				if cb.Value == nil {
					continue
				}
				for _, cbItem := range cb.Value.Map() {
					for _, cbOp := range cbItem.Operations() {
						out = append(out, cbOp.OperationID)
					}
				}
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}
