package store_test

import (
	"context"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/store"
)

func createEstimate(ctx context.Context, st *store.Store, city string) store.FareEstimate {
	now := time.Now()
	e, err := st.CreateFareEstimate(ctx, store.FareEstimate{
		ID: newID("est_"), RideType: store.RideTypeEconomy, City: city,
		OriginLat: 37.79, OriginLng: -122.39, DestinationLat: 37.76, DestinationLng: -122.42,
		DistanceMeters: 5000, DurationSeconds: 600, PriceMin: 1500, PriceMax: 1900, Currency: "usd",
		CreatorRole: store.RoleRider, CreatorSubject: newID("rdr_"), CreatorAccount: "acct_default",
		CreatedAt: now, ExpiresAt: now.Add(5 * time.Minute),
	})
	Expect(err).NotTo(HaveOccurred())
	return e
}

var _ = Describe("Booking and the trip lifecycle", func() {
	forEachEngine(func(e *testEngine) {
		var st *store.Store
		BeforeEach(func() { st = e.shared })

		Describe("one active trip per rider and per driver", func() {
			It("is enforced by the database and reported by which party is busy", func(ctx SpecContext) {
				city := createCity(ctx, st, cityOpts{}).ID
				d1, d2 := createDriver(ctx, st, driverOpts{City: city}), createDriver(ctx, st, driverOpts{City: city})
				r1, r2 := createRider(ctx, st), createRider(ctx, st)
				first := createTrip(ctx, st, tripOpts{Status: store.TripStatusAccepted, DriverID: d1.ID, RiderID: r1.ID})

				_, err := st.CreateTrip(ctx, tripFor(first, newID("trp_"), d2.ID, r1.ID, store.TripStatusArriving))
				Expect(err).To(MatchError(store.ErrRiderHasActiveTrip))
				Expect(err).To(MatchError(store.ErrDuplicate))

				_, err = st.CreateTrip(ctx, tripFor(first, newID("trp_"), d1.ID, r2.ID, store.TripStatusInProgress))
				Expect(err).To(MatchError(store.ErrDriverHasActiveTrip))

				_, err = st.CreateTrip(ctx, first)
				Expect(err).To(MatchError(store.ErrDuplicate), "a repeated id is a plain duplicate")
				Expect(err).NotTo(MatchError(store.ErrRiderHasActiveTrip))

				// Final trips do not count.
				createTrip(ctx, st, tripOpts{Status: store.TripStatusCompleted, DriverID: d1.ID, RiderID: r1.ID})
				createTrip(ctx, st, tripOpts{Status: store.TripStatusCancelled, DriverID: d1.ID, RiderID: r1.ID})
			})

			It("books the trip when the active trip that refused it ends before it can be named", func(ctx SpecContext) {
				first := createTrip(ctx, st, tripOpts{Status: store.TripStatusAccepted})
				driver := createDriver(ctx, st, driverOpts{City: first.City})
				holds := 0
				DeferCleanup(store.HoldTripConflict(func() {
					holds++
					if holds == 1 { // the rider's trip ends between the refusal and the look
						at := time.Now()
						Expect(st.SetTripStatus(ctx, store.SetTripStatusParams{ID: first.ID, From: store.TripStatusAccepted,
							To: store.TripStatusCancelled, At: at, CancelledAt: &at})).To(Succeed())
					}
				}))
				second, err := st.CreateTrip(ctx, tripFor(first, newID("trp_"), driver.ID, first.RiderID, store.TripStatusAccepted))
				Expect(err).NotTo(HaveOccurred())
				Expect(holds).To(Equal(1), "one refusal, then the insert again")
				got, err := st.TripByID(ctx, second.ID)
				Expect(err).NotTo(HaveOccurred())
				Expect(got.RiderID).To(Equal(first.RiderID))
				Expect(got.Status).To(Equal(store.TripStatusAccepted))

				By("a refusal still names the trip that stays")
				_, err = st.CreateTrip(ctx, tripFor(first, newID("trp_"), createDriver(ctx, st, driverOpts{City: first.City}).ID, first.RiderID, store.TripStatusAccepted))
				Expect(err).To(MatchError(store.ErrRiderHasActiveTrip))
				Expect(holds).To(Equal(2))
			})

			It("refuses, names and inserts again on a request's transaction, through pgx on its connection", func(ctx SpecContext) {
				if e.name != "PostgreSQL" {
					Skip("SQLite runs its transactions through GORM, and one at a time: the hold could not end a trip meanwhile")
				}
				// A request's context is never cancelled (the server runs its work without the
				// client's cancellation), so its transaction's statements run through pgx on the
				// transaction's connection; a spec's context would send them through GORM.
				reqCtx := context.WithoutCancel(ctx)
				busy := createTrip(ctx, st, tripOpts{Status: store.TripStatusAccepted})
				ending := createTrip(ctx, st, tripOpts{Status: store.TripStatusAccepted})
				holds := 0
				DeferCleanup(store.HoldTripConflict(func() {
					holds++
					if holds == 2 { // the second refusal's trip ends, from outside the transaction
						at := time.Now()
						Expect(st.SetTripStatus(ctx, store.SetTripStatusParams{ID: ending.ID, From: store.TripStatusAccepted,
							To: store.TripStatusCompleted, At: at, CompletedAt: &at})).To(Succeed())
					}
				}))
				var booked store.Trip
				Expect(st.WithTx(reqCtx, func(tx *store.Store) error {
					_, err := tx.CreateTrip(reqCtx, tripFor(busy, newID("trp_"), createDriver(ctx, st, driverOpts{City: busy.City}).ID, busy.RiderID, store.TripStatusAccepted))
					Expect(err).To(MatchError(store.ErrRiderHasActiveTrip))
					booked, err = tx.CreateTrip(reqCtx, tripFor(ending, newID("trp_"), createDriver(ctx, st, driverOpts{City: ending.City}).ID, ending.RiderID, store.TripStatusAccepted))
					return err
				})).To(Succeed())
				Expect(holds).To(Equal(2))
				got, err := st.TripByID(ctx, booked.ID)
				Expect(err).NotTo(HaveOccurred())
				Expect(got.RiderID).To(Equal(ending.RiderID))
			})

			It("leaves the caller's transaction usable after a refused insert", func(ctx SpecContext) {
				first := createTrip(ctx, st, tripOpts{Status: store.TripStatusAccepted})
				var after store.Trip
				err := st.WithTx(ctx, func(tx *store.Store) error {
					_, err := tx.CreateTrip(ctx, tripFor(first, newID("trp_"), createDriver(ctx, tx, driverOpts{City: first.City}).ID, first.RiderID, store.TripStatusAccepted))
					Expect(err).To(MatchError(store.ErrRiderHasActiveTrip))
					after, err = tx.TripByID(ctx, first.ID)
					return err
				})
				Expect(err).NotTo(HaveOccurred())
				Expect(after.ID).To(Equal(first.ID))
				busy, err := st.RiderHasActiveTrip(ctx, store.DefaultAccount, first.RiderID)
				Expect(err).NotTo(HaveOccurred())
				Expect(busy).To(BeTrue())
				busy, err = st.RiderHasActiveTrip(ctx, store.DefaultAccount, createRider(ctx, st).ID)
				Expect(err).NotTo(HaveOccurred())
				Expect(busy).To(BeFalse())
				By("another account's rider is as absent as a missing one")
				_, err = st.RiderHasActiveTrip(ctx, "acct_elsewhere", first.RiderID)
				Expect(err).To(MatchError(store.ErrNotFound))
				_, err = st.RiderHasActiveTrip(ctx, store.DefaultAccount, "rdr_missing")
				Expect(err).To(MatchError(store.ErrNotFound))
			})
		})

		Describe("SetTripStatus", func() {
			It("moves a trip only from the status it names", func(ctx SpecContext) {
				t := createTrip(ctx, st, tripOpts{Status: store.TripStatusAccepted})
				at := time.Now().Add(time.Minute)
				Expect(st.SetTripStatus(ctx, store.SetTripStatusParams{
					ID: t.ID, From: store.TripStatusAccepted, To: store.TripStatusInProgress, At: at, PickupTime: &at,
				})).To(Succeed())
				err := st.SetTripStatus(ctx, store.SetTripStatusParams{
					ID: t.ID, From: store.TripStatusAccepted, To: store.TripStatusCancelled, At: at, CancelledAt: &at,
				})
				Expect(err).To(MatchError(store.ErrConflict))
				got, err := st.TripByID(ctx, t.ID)
				Expect(err).NotTo(HaveOccurred())
				Expect(got.Status).To(Equal(store.TripStatusInProgress))
				Expect(got.PickupTime).To(Equal(at.UTC().Truncate(time.Microsecond)))
				Expect(got.UpdatedAt).To(Equal(at.UTC().Truncate(time.Microsecond)))
				Expect(got.CancelledAt).To(BeNil())

				Expect(st.SetTripStatus(ctx, store.SetTripStatusParams{
					ID: newID("trp_"), From: store.TripStatusAccepted, To: store.TripStatusArriving, At: at,
				})).To(MatchError(store.ErrConflict))
			})
		})

		Describe("fare estimates", func() {
			It("are consumed once, then linked to the trip booked from them", func(ctx SpecContext) {
				d := createDriver(ctx, st, driverOpts{})
				est := createEstimate(ctx, st, d.City)
				trip := tripFor(store.Trip{City: d.City}, newID("trp_"), d.ID, createRider(ctx, st).ID, store.TripStatusAccepted)
				err := st.WithTx(ctx, func(tx *store.Store) error {
					if err := tx.MarkFareEstimateUsed(ctx, store.MarkFareEstimateUsedParams{ID: est.ID, At: time.Now()}); err != nil {
						return err
					}
					if _, err := tx.CreateTrip(ctx, trip); err != nil {
						return err
					}
					return tx.SetFareEstimateTrip(ctx, store.SetFareEstimateTripParams{ID: est.ID, TripID: trip.ID})
				})
				Expect(err).NotTo(HaveOccurred())
				got, err := st.FareEstimateByID(ctx, est.CreatorAccount, est.ID)
				Expect(err).NotTo(HaveOccurred())
				Expect(got.UsedAt).NotTo(BeNil())
				Expect(*got.TripID).To(Equal(trip.ID))

				err = st.MarkFareEstimateUsed(ctx, store.MarkFareEstimateUsedParams{ID: est.ID, At: time.Now()})
				Expect(err).To(MatchError(store.ErrConflict))
				err = st.SetFareEstimateTrip(ctx, store.SetFareEstimateTripParams{ID: est.ID, TripID: trip.ID})
				Expect(err).To(MatchError(store.ErrConflict), "linked once")
			})

			It("are linked only when consumed, and only to a trip that exists", func(ctx SpecContext) {
				est := createEstimate(ctx, st, createCity(ctx, st, cityOpts{}).ID)
				err := st.SetFareEstimateTrip(ctx, store.SetFareEstimateTripParams{ID: est.ID, TripID: newID("trp_")})
				Expect(err).To(MatchError(store.ErrConflict))
				err = st.WithTx(ctx, func(tx *store.Store) error {
					if err := tx.MarkFareEstimateUsed(ctx, store.MarkFareEstimateUsedParams{ID: est.ID, At: time.Now()}); err != nil {
						return err
					}
					return tx.SetFareEstimateTrip(ctx, store.SetFareEstimateTripParams{ID: est.ID, TripID: newID("trp_")})
				})
				Expect(err).To(MatchError(store.ErrInvalidReference))
				got, err := st.FareEstimateByID(ctx, est.CreatorAccount, est.ID)
				Expect(err).NotTo(HaveOccurred())
				Expect(got.UsedAt).To(BeNil(), "the failed booking rolled back")
			})
		})

		Describe("ClaimNearestDriver", func() {
			It("finds the nearest driver beyond the nearby radius when none is free within it", func(ctx SpecContext) {
				city := createCity(ctx, st, cityOpts{}).ID
				pickupLat, pickupLng := 37.79, -122.40
				createDriver(ctx, st, driverOpts{City: city, Lat: pickupLat + 0.054, Lng: pickupLng}) // 6 km
				fourKm := createDriver(ctx, st, driverOpts{City: city, Lat: pickupLat - 0.036, Lng: pickupLng})
				createDriver(ctx, st, driverOpts{City: city, Unavailable: true, Lat: pickupLat, Lng: pickupLng})
				got, err := st.ClaimNearestDriver(ctx, store.ClaimNearestDriverParams{City: city, RideType: "economy",
					Lat: pickupLat, Lng: pickupLng, FreshSince: time.Now().Add(-time.Minute), At: time.Now()})
				Expect(err).NotTo(HaveOccurred())
				Expect(got.ID).To(Equal(fourKm.ID))
			})

			It("claims the nearest free driver of the city and skips busy ones", func(ctx SpecContext) {
				city := createCity(ctx, st, cityOpts{}).ID
				createCity(ctx, st, cityOpts{})
				pickupLat, pickupLng := 37.79, -122.40
				// Nearest, but unavailable; next, available but on an active trip.
				createDriver(ctx, st, driverOpts{City: city, Unavailable: true, Lat: 37.7901, Lng: -122.4001})
				onTrip := createDriver(ctx, st, driverOpts{City: city, Lat: 37.7902, Lng: -122.4002})
				createTrip(ctx, st, tripOpts{Status: store.TripStatusArriving, DriverID: onTrip.ID})
				far := createDriver(ctx, st, driverOpts{City: city, Lat: 37.70, Lng: -122.40})
				near := createDriver(ctx, st, driverOpts{City: city, Lat: 37.80, Lng: -122.41})
				createDriver(ctx, st, driverOpts{Lat: pickupLat, Lng: pickupLng}) // another city

				params := store.ClaimNearestDriverParams{City: city, RideType: "economy", Lat: pickupLat, Lng: pickupLng, FreshSince: time.Now().Add(-time.Minute), At: time.Now()}
				got, err := st.ClaimNearestDriver(ctx, params)
				Expect(err).NotTo(HaveOccurred())
				Expect(got.ID).To(Equal(near.ID))
				Expect(got.Available).To(BeFalse())
				got, err = st.ClaimNearestDriver(ctx, params)
				Expect(err).NotTo(HaveOccurred())
				Expect(got.ID).To(Equal(far.ID))
				_, err = st.ClaimNearestDriver(ctx, params)
				Expect(err).To(MatchError(store.ErrNotFound))

				lat, lng := 37.75, -122.45
				Expect(st.ReleaseDriver(ctx, store.ReleaseDriverParams{ID: near.ID, At: time.Now(), Lat: &lat, Lng: &lng})).To(Succeed())
				released, err := st.DriverByID(ctx, near.ID)
				Expect(err).NotTo(HaveOccurred())
				Expect(released.Available).To(BeTrue())
				Expect(released.Lat).To(Equal(lat))
				Expect(st.ReleaseDriver(ctx, store.ReleaseDriverParams{ID: newID("drv_"), At: time.Now()})).To(MatchError(store.ErrNotFound))
			})

			It("returns the claimed driver whole, as stored", func(ctx SpecContext) {
				city := createCity(ctx, st, cityOpts{}).ID
				at := time.Date(2026, 3, 4, 5, 6, 7, 891011234, time.FixedZone("IST", 5*3600+1800))
				heading, speed, reported := 271.5, 12.25, at.Add(-time.Second)
				id := newID("drv_")
				created, err := st.CreateDriver(ctx, store.Driver{ID: id, Name: "Ada Lovelace", Rating: 4.61,
					Photo: "https://cdn.example.com/drivers/" + id + ".jpg", VehicleMake: "Toyota", VehicleModel: "Prius",
					VehicleColor: "Blue", VehiclePlate: "7ABC123", City: city, Lat: 37.7901, Lng: -122.4001,
					Heading: &heading, Speed: &speed, PositionAt: &reported, Available: true, Online: true,
					RideTypes: "economy,xl", CreatedAt: at.Add(-time.Hour), UpdatedAt: at.Add(-time.Minute)})
				Expect(err).NotTo(HaveOccurred())
				claimedAt := at.Add(time.Second)
				// Claimed as a booking claims it, in a request's transaction: on PostgreSQL its
				// statements run through pgx on the transaction's connection.
				reqCtx := context.WithoutCancel(ctx)
				var got store.Driver
				Expect(st.WithTx(reqCtx, func(tx *store.Store) (err error) {
					got, err = tx.ClaimNearestDriver(reqCtx, store.ClaimNearestDriverParams{City: city, RideType: "xl",
						Lat: 37.79, Lng: -122.40, FreshSince: at.Add(-time.Minute), At: claimedAt})
					return err
				})).To(Succeed())
				// Every field is set, to values no other field of its type holds, so a column
				// left out or two swapped come back different; the claim changes two of them.
				Expect(got.Available).To(BeFalse())
				Expect(got.UpdatedAt).To(Equal(claimedAt.UTC().Truncate(time.Microsecond)))
				got.Available, got.UpdatedAt = true, created.UpdatedAt
				Expect(got).To(Equal(created))

				stored, err := st.DriverByID(ctx, id)
				Expect(err).NotTo(HaveOccurred())
				Expect(stored.Available).To(BeFalse())
				Expect(stored.UpdatedAt).To(Equal(claimedAt.UTC().Truncate(time.Microsecond)))
			})

			It("never gives one driver to two concurrent claims", func(ctx SpecContext) {
				city := createCity(ctx, st, cityOpts{}).ID
				const drivers, claims = 4, 16
				for i := range drivers {
					createDriver(ctx, st, driverOpts{City: city, Lat: 37.78 + float64(i)/1000})
				}
				var mu sync.Mutex
				claimed := map[string]int{}
				var missed int
				var wg sync.WaitGroup
				for range claims {
					wg.Go(func() {
						defer GinkgoRecover()
						err := st.WithTx(ctx, func(tx *store.Store) error {
							d, err := tx.ClaimNearestDriver(ctx, store.ClaimNearestDriverParams{City: city, RideType: "economy", Lat: 37.78, Lng: -122.41, FreshSince: time.Now().Add(-time.Minute), At: time.Now()})
							if err != nil {
								return err
							}
							mu.Lock()
							claimed[d.ID]++
							mu.Unlock()
							return nil
						})
						if err != nil {
							Expect(err).To(MatchError(store.ErrNotFound))
							mu.Lock()
							missed++
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				Expect(claimed).To(HaveLen(drivers))
				for id, n := range claimed {
					Expect(n).To(Equal(1), id)
				}
				Expect(missed).To(Equal(claims - drivers))
			})
		})

		It("records one cancellation per trip", func(ctx SpecContext) {
			t := createTrip(ctx, st, tripOpts{Status: store.TripStatusCancelled})
			c := store.Cancellation{ID: newID("can_"), TripID: t.ID, Reason: "Plans changed", CancelledBy: store.RoleRider, CreatedAt: time.Now()}
			_, err := st.CreateCancellation(ctx, c)
			Expect(err).NotTo(HaveOccurred())
			got, err := st.CancellationByTrip(ctx, t.ID)
			Expect(err).NotTo(HaveOccurred())
			Expect(got.Reason).To(Equal("Plans changed"))
			c.ID = newID("can_")
			_, err = st.CreateCancellation(ctx, c)
			Expect(err).To(MatchError(store.ErrDuplicate))
			c.TripID = newID("trp_")
			_, err = st.CreateCancellation(ctx, c)
			Expect(err).To(MatchError(store.ErrInvalidReference))
		})
	})
})

// tripFor copies template's route and fare into a new trip of the given parties and status.
func tripFor(template store.Trip, id, driverID, riderID, status string) store.Trip {
	now := time.Now()
	return store.Trip{
		ID: id, Status: status, RideType: store.RideTypeEconomy, City: template.City,
		RiderID: riderID, DriverID: driverID, PickupLat: 37.79, PickupLng: -122.39,
		DropoffLat: 37.76, DropoffLng: -122.42, PickupTime: now.Add(5 * time.Minute),
		FareTotal: 1900, FareCurrency: "usd", CreatedAt: now, UpdatedAt: now,
	}
}
