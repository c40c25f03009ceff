package tests

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/store/storetest"
)

var _ = ForEachEngine("Live trips", func(h *Harness) {
	It("match the nearer online driver, and push arriving, a falling ETA, the start and the end to the rider's stream on any replica", func() {
		city := h.NewCity(CityOpts{})
		// Two drivers of the city, offline until they say otherwise; the estimate's pickup is
		// 2 km north and 1 km east of the center.
		near := h.NewDriver(DriverOpts{City: city.ID, Offline: true})
		far := h.NewDriver(DriverOpts{City: city.ID, Offline: true})
		nearKey, farKey := h.Key(auth.RoleDriver, near.ID), h.Key(auth.RoleDriver, far.ID)
		h.goOnline(farKey, far, loc(city, 2_000+3_000, 1_000))
		h.goOnline(nearKey, near, loc(city, 2_000+1_500, 1_000))

		rider := h.NewRider()
		riderKey := h.Key(auth.RoleRider, rider.ID)
		trip := h.BookTrip(riderKey, h.NewEstimate(riderKey, city).EstimateId)
		Expect(trip.DriverSummary.Id).To(Equal(near.ID), "the nearer online driver gets the trip")
		Expect(trip.EtaMinutes).NotTo(BeNil())

		// The rider follows on this replica; an admin's stream and the rider's GraphQL
		// subscription run on another one.
		replica, _ := h.Replica(server.Config{}, nil)
		riderStream := h.FollowTrip(riderKey, trip.Id, "")
		adminStream := replica.FollowTrip(h.Admin, trip.Id, "")
		subscription := replica.SubscribeTrip(riderKey, trip.Id)
		Expect(subscription.Next()).To(And(HaveKeyWithValue("status", "ACCEPTED"), HaveKeyWithValue("driverLocation", Not(BeNil()))))
		Expect(riderStream.Status).To(Equal(http.StatusOK))
		Expect(adminStream.Status).To(Equal(http.StatusOK))
		for _, s := range []*tripStream{riderStream, adminStream} {
			first := s.Next()
			Expect(first.Update["status"]).To(Equal("accepted"))
			Expect(first.Update).To(HaveKey("driver_location"), "the rider and admins see where the driver is")
		}

		Expect(h.PutStatus(nearKey, trip.Id, "arriving", nil).Status).To(Equal(http.StatusOK))
		for _, s := range []*tripStream{riderStream, adminStream} {
			Expect(s.Next().Update["status"]).To(Equal("arriving"))
		}
		Expect(subscription.Next()["status"]).To(Equal("ARRIVING"))

		// The driver comes closer: every position reaches both streams, with a falling ETA.
		var etas []float64
		for i, meters := range []float64{1_200, 800, 400, 100} {
			h.reportPosition(nearKey, near.ID, loc(city, 2_000+meters, 1_000), time.Now().Add(time.Duration(i+1)*time.Millisecond))
			m := riderStream.Next()
			Expect(m.Update["status"]).To(Equal("arriving"))
			Expect(m.Update["driver_location"]).To(HaveKeyWithValue("lat", BeNumerically("~", loc(city, 2_000+meters, 1_000)["lat"], 1e-9)))
			etas = append(etas, m.Update["eta_minutes"].(float64))
			Expect(adminStream.Next().Update["eta_minutes"]).To(Equal(m.Update["eta_minutes"]), "the other replica tells the same")
			Expect(subscription.Next()["etaMinutes"]).To(Equal(m.Update["eta_minutes"]), "and so does GraphQL")
		}
		Expect(etas).To(Equal([]float64{4, 3, 2, 1}), "ceil(1.3 × distance at 30 km/h), at least a minute")

		Expect(h.PutStatus(nearKey, trip.Id, "in_progress", nil).Status).To(Equal(http.StatusOK))
		for _, s := range []*tripStream{riderStream, adminStream} {
			m := s.Next()
			Expect(m.Update["status"]).To(Equal("in_progress"))
			Expect(m.Update).NotTo(HaveKey("eta_minutes"), "no ETA after pickup")
		}
		Expect(subscription.Next()).To(And(HaveKeyWithValue("status", "IN_PROGRESS"), HaveKeyWithValue("etaMinutes", BeNil())))
		Expect(h.PutStatus(nearKey, trip.Id, "completed", nil).Status).To(Equal(http.StatusOK))
		for _, s := range []*tripStream{riderStream, adminStream} {
			m := s.Next()
			Expect(m.Update["status"]).To(Equal("completed"))
			Expect(m.Update).NotTo(HaveKey("eta_minutes"))
			Expect(m.Update).NotTo(HaveKey("driver_location"), "nobody sees where the driver is after the trip")
			s.Ended()
		}
		Expect(subscription.Next()).To(And(HaveKeyWithValue("status", "COMPLETED"), HaveKeyWithValue("etaMinutes", BeNil()),
			HaveKeyWithValue("driverLocation", BeNil())))
		Eventually(subscription.Updates).Within(5*time.Second).Should(BeClosed(), "the subscription completes with the trip")

		// The final trip carries no ETA and no position anywhere.
		for _, key := range []string{riderKey, nearKey, h.Admin} {
			final := h.GET("/v1/trips/"+trip.Id, key).JSON()
			Expect(final).NotTo(HaveKey("eta_minutes"))
			Expect(final).NotTo(HaveKey("driver_location"))
		}
		gql := h.Query(riderKey, `query($id: ID!) { trip(id: $id) { status etaMinutes } }`, map[string]any{"id": trip.Id})
		Expect(gql.Errors).To(BeEmpty())
		Expect(gql.Data).To(HaveKeyWithValue("trip", And(HaveKeyWithValue("status", "COMPLETED"), HaveKeyWithValue("etaMinutes", BeNil()))))
	})

	It("show where the driver is to the trip's rider and admins only, and the rider to the driver", func() {
		l := h.bookLiveTrip()
		city, driver, driverKey, rider, riderKey, trip := l.city, l.driver, l.driverKey, l.rider, l.riderKey, l.trip
		h.reportPosition(driverKey, driver.ID, loc(city, 2_500, 1_000), time.Now())

		asRider := h.GET("/v1/trips/"+trip.Id, riderKey).JSON()
		Expect(asRider).To(HaveKey("driver_location"))
		Expect(asRider).NotTo(HaveKey("rider_summary"))
		Expect(h.GET("/v1/trips/"+trip.Id, h.Admin).JSON()).To(And(HaveKey("driver_location"), HaveKey("rider_summary")))
		asDriver := h.GET("/v1/trips/"+trip.Id, driverKey).JSON()
		Expect(asDriver).NotTo(HaveKey("driver_location"))
		Expect(asDriver["rider_summary"]).To(Equal(map[string]any{"id": rider.ID, "name": rider.Name, "rating": rider.Rating}))
		Expect(h.GET("/v1/trips/"+trip.Id+"?fields=status", h.Admin).JSON()).To(HaveLen(2))

		// Another rider of the account: the trip's refusal, for the stream too.
		stranger := h.Key(auth.RoleRider, h.NewRider().ID)
		ExpectProblem(h.GET("/v1/trips/"+trip.Id, stranger), http.StatusForbidden, "forbidden")
		Expect(h.FollowTrip(stranger, trip.Id, "").Status).To(Equal(http.StatusForbidden))
		ExpectProblem(h.GET("/v1/trips/trp_nosuchtrip0000000000000000/updates", riderKey), http.StatusNotFound, "not_found")

		// Without Accept: text/event-stream, the current state once, as each caller may see it.
		Expect(h.GET("/v1/trips/"+trip.Id+"/updates", riderKey).JSON()).To(And(
			HaveKeyWithValue("status", "accepted"), HaveKey("eta_minutes"), HaveKey("driver_location")))
		Expect(h.GET("/v1/trips/"+trip.Id+"/updates", driverKey).JSON()).NotTo(HaveKey("driver_location"))

		// The driver's own stream never shows the position either.
		s := h.FollowTrip(driverKey, trip.Id, "")
		Expect(s.Next().Update).NotTo(HaveKey("driver_location"))
	})

	It("resume a stream from Last-Event-ID without sending what the client has", func() {
		l := h.bookLiveTrip()
		driverKey, riderKey, trip := l.driverKey, l.riderKey, l.trip

		first := h.FollowTrip(riderKey, trip.Id, "").Next()
		resumed := h.FollowTrip(riderKey, trip.Id, first.ID)
		Consistently(resumed.Messages, 300*time.Millisecond).ShouldNot(Receive(), "nothing changed since that message")
		Expect(h.PutStatus(driverKey, trip.Id, "arriving", nil).Status).To(Equal(http.StatusOK))
		Expect(resumed.Next().Update["status"]).To(Equal("arriving"))

		// Missed changes: the stream starts with the current state.
		Expect(h.PutStatus(driverKey, trip.Id, "in_progress", nil).Status).To(Equal(http.StatusOK))
		late := h.FollowTrip(riderKey, trip.Id, first.ID)
		Expect(late.Next().Update["status"]).To(Equal("in_progress"))
	})

	It("send heartbeats to an idle stream", func() {
		beating, _ := h.Replica(server.Config{LiveHeartbeat: 50 * time.Millisecond}, nil)
		l := h.bookLiveTrip()
		riderKey, trip := l.riderKey, l.trip
		s := beating.FollowTrip(riderKey, trip.Id, "")
		s.Next()
		Eventually(s.Heartbeats.Load).Within(2 * time.Second).Should(BeNumerically(">=", 3))
	})

	It("refuse positions that are not the driver's, not on the globe, from the future or from an offline driver", func() {
		city := h.NewCity(CityOpts{})
		driver := h.NewDriver(DriverOpts{City: city.ID, Offline: true})
		driverKey := h.Key(auth.RoleDriver, driver.ID)
		other := h.Key(auth.RoleDriver, h.NewDriver(DriverOpts{City: city.ID}).ID)
		post := func(key string, positions ...map[string]any) *Response {
			return h.Do(Request{Method: http.MethodPost, Path: "/v1/drivers/" + driver.ID + "/positions", Key: key,
				Body: map[string]any{"positions": positions}})
		}
		at := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(time.RFC3339Nano) }
		here := func(lat, lng float64, recorded string) map[string]any {
			return map[string]any{"lat": lat, "lng": lng, "recorded_at": recorded}
		}
		ExpectProblem(post(other, here(city.CenterLat, city.CenterLng, at(0))), http.StatusForbidden, "forbidden")
		ExpectProblem(post(h.Admin, here(city.CenterLat, city.CenterLng, at(0))), http.StatusForbidden, "forbidden")
		ExpectProblem(post(driverKey, here(city.CenterLat, city.CenterLng, at(0))), http.StatusConflict, "driver_offline")

		Expect(h.Do(Request{Method: http.MethodPut, Path: "/v1/drivers/" + driver.ID + "/availability", Key: driverKey,
			Body: map[string]any{"status": "online"}}).Status).To(Equal(http.StatusOK))
		res := post(driverKey, here(91, city.CenterLng, at(0)))
		ExpectProblem(res, http.StatusBadRequest, "invalid_request")
		Expect(res.Problem().Errors).To(HaveValue(ContainElement(HaveField("Location", "body.positions.0.lat"))))
		res = post(driverKey, here(city.CenterLat, city.CenterLng, at(0)), here(city.CenterLat, city.CenterLng, at(time.Hour)))
		ExpectProblem(res, http.StatusUnprocessableEntity, "position_in_future")
		Expect(res.Problem().Errors).To(HaveValue(ContainElement(HaveField("Location", "body.positions.1.recorded_at"))))

		// Late, out of order and twice: the latest recorded position stays.
		latest := post(driverKey, here(city.CenterLat+0.01, city.CenterLng, at(2*time.Second)), here(city.CenterLat+0.02, city.CenterLng, at(time.Second)))
		Expect(latest.Status).To(Equal(http.StatusOK))
		Expect(latest.JSON()["received"]).To(BeEquivalentTo(2))
		Expect(latest.JSON()["position"]).To(HaveKeyWithValue("lat", BeNumerically("~", city.CenterLat+0.01, 1e-9)))
		again := post(driverKey, here(city.CenterLat+0.03, city.CenterLng, at(-time.Minute)))
		Expect(again.JSON()["position"]).To(Equal(latest.JSON()["position"]), "an older report changes nothing")
	})

	It("never match an offline driver, a driver of another ride type, or one whose position is stale", func() {
		city := h.NewCity(CityOpts{})
		driver := h.NewDriver(DriverOpts{City: city.ID})
		driverKey := h.Key(auth.RoleDriver, driver.ID)
		rider := h.NewRider()
		riderKey := h.Key(auth.RoleRider, rider.ID)

		Expect(h.Do(Request{Method: http.MethodPut, Path: "/v1/drivers/" + driver.ID + "/availability", Key: driverKey,
			Body: map[string]any{"status": "offline"}}).JSON()["status"]).To(Equal("offline"))
		ExpectProblem(h.Book(riderKey, map[string]any{"estimate_id": h.NewEstimate(riderKey, city).EstimateId}), http.StatusConflict, "no_driver_available")

		Expect(h.Do(Request{Method: http.MethodPut, Path: "/v1/drivers/" + driver.ID + "/availability", Key: h.Admin,
			Body: map[string]any{"status": "online"}}).JSON()["status"]).To(Equal("online"))
		Expect(storetest.AgeDriverPosition(context.Background(), h.Store, driver.ID, 3*time.Minute)).To(Succeed())
		ExpectProblem(h.Book(riderKey, map[string]any{"estimate_id": h.NewEstimate(riderKey, city).EstimateId}), http.StatusConflict, "no_driver_available")

		h.reportPosition(driverKey, driver.ID, loc(city, 0, 0), time.Now())
		trip := h.BookTrip(riderKey, h.NewEstimate(riderKey, city).EstimateId)
		availability := h.GET("/v1/drivers/"+driver.ID+"/availability", driverKey).JSON()
		Expect(availability["active_trip_id"]).To(Equal(trip.Id))

		// Going offline mid-trip: the trip runs to its end, and the driver gets no new one.
		Expect(h.Do(Request{Method: http.MethodPut, Path: "/v1/drivers/" + driver.ID + "/availability", Key: driverKey,
			Body: map[string]any{"status": "offline"}}).Status).To(Equal(http.StatusOK))
		h.reportPosition(driverKey, driver.ID, loc(city, 100, 0), time.Now().Add(time.Millisecond))
		Expect(h.PutStatus(driverKey, trip.Id, "in_progress", nil).Status).To(Equal(http.StatusOK))
		Expect(h.PutStatus(driverKey, trip.Id, "completed", nil).Status).To(Equal(http.StatusOK))
		other := h.NewRider()
		otherKey := h.Key(auth.RoleRider, other.ID)
		ExpectProblem(h.Book(otherKey, map[string]any{"estimate_id": h.NewEstimate(otherKey, city).EstimateId}), http.StatusConflict, "no_driver_available")
		Expect(h.GET("/v1/drivers/"+driver.ID+"/availability", driverKey).JSON()).NotTo(HaveKey("active_trip_id"))
	})

	It("close a socket whose key is refused, and end a subscription to someone else's trip with FORBIDDEN", func(ctx SpecContext) {
		dial := func() *websocket.Conn {
			conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(h.URL, "http")+"/v1/graphql",
				&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
			Expect(err).NotTo(HaveOccurred())
			return conn
		}
		conn := dial()
		Expect(conn.Write(ctx, websocket.MessageText, []byte(`{"type":"connection_init","payload":{"Authorization":"Bearer rk_nope"}}`))).To(Succeed())
		_, _, err := conn.Read(ctx)
		Expect(websocket.CloseStatus(err)).To(Equal(websocket.StatusCode(4403)))

		trip := h.bookLiveTrip().trip
		stranger := h.Key(auth.RoleRider, h.NewRider().ID)
		conn = dial()
		defer conn.CloseNow()
		Expect(conn.Write(ctx, websocket.MessageText, []byte(`{"type":"connection_init","payload":{"Authorization":"Bearer `+stranger+`"}}`))).To(Succeed())
		_, ack, err := conn.Read(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(ack)).To(ContainSubstring("connection_ack"))
		Expect(conn.Write(ctx, websocket.MessageText, []byte(`{"id":"s1","type":"subscribe","payload":{"query":"subscription { tripUpdated(id: \"`+trip.Id+`\") { status } }"}}`))).To(Succeed())
		_, msg, err := conn.Read(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(msg)).To(And(ContainSubstring(`"id":"s1"`), ContainSubstring("FORBIDDEN")))
	})

	It("answer a GraphQL subscription sent over HTTP with 400, pointing at the WebSocket", func() {
		res := h.GQL(h.Admin, map[string]any{"query": `subscription { tripUpdated(id: "trp_x") { status } }`})
		Expect(res.Status).To(Equal(http.StatusBadRequest))
		errs := res.JSON()["errors"].([]any)
		Expect(errs[0]).To(HaveKeyWithValue("message", ContainSubstring("WebSocket")))
		Expect(errs[0]).To(HaveKeyWithValue("extensions", HaveKeyWithValue("code", "BAD_REQUEST")))
	})

	It("list the served cities with each ride type's prices", func() {
		city := h.NewCity(CityOpts{})
		res := h.GET("/v1/cities", h.Key(auth.RoleRider, h.NewRider().ID))
		Expect(res.Status).To(Equal(http.StatusOK))
		var found map[string]any
		for _, c := range res.JSON()["data"].([]any) {
			if c.(map[string]any)["id"] == city.ID {
				found = c.(map[string]any)
			}
		}
		Expect(found).NotTo(BeNil())
		Expect(found["currency"]).To(Equal(city.Currency))
		types := found["ride_types"].([]any)
		Expect(types).To(HaveLen(3))
		Expect(types[0]).To(Equal(map[string]any{"ride_type": "economy", "base_fare": float64(city.BaseFare),
			"per_km": float64(city.PerKm), "per_minute": float64(city.PerMinute), "minimum_fare": float64(city.MinimumFare)}))
	})
})
