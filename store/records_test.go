package store_test

import (
	"context"
	"errors"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/store"
)

var _ = Describe("Records", func() {
	forEachEngine(func(e *testEngine) {
		var st *store.Store
		BeforeEach(func() { st = e.shared })

		Describe("lookups by id", func() {
			It("return a trip with its driver and every public field, and no internal one", func(ctx SpecContext) {
				created := createTrip(ctx, st, tripOpts{Fare: 2310})
				got, err := st.TripByID(ctx, created.ID)
				Expect(err).NotTo(HaveOccurred())
				Expect(got.Driver.ID).To(Equal(created.DriverID))
				Expect(got.Driver.Name).To(Equal("Test Driver"))
				Expect(got.Driver.Rating).To(Equal(4.87))
				Expect(got.FareTotal).To(BeEquivalentTo(2310))
				Expect(*got.PickupAddress).To(Equal("1 Market St"))
				Expect(got.DropoffAddress).To(BeNil())
				Expect(*got.ETAMinutes).To(Equal(4))
				Expect(got.RoutePolyline).To(BeEmpty())
				Expect(got.MatchingScore).To(BeZero())
				Expect(got.DriverPayout).To(BeZero())
				Expect(got.PlatformCost).To(BeZero())

				// CreateTrip stored them all the same.
				var row store.Trip
				Expect(st.TestDB().WithContext(ctx).First(&row, "id = ?", created.ID).Error).To(Succeed())
				Expect(row.RoutePolyline).To(Equal("_p~iF~ps|U_ulLnnqC"))
				Expect(row.MatchingScore).To(Equal(0.92))
				Expect(row.DriverPayout).To(BeEquivalentTo(2310 * 75 / 100))
				Expect(row.PlatformCost).To(BeEquivalentTo(85))
			})

			It("return drivers, riders and cities", func(ctx SpecContext) {
				d := createDriver(ctx, st, driverOpts{Unavailable: true})
				r := createRider(ctx, st)
				gotD, err := st.DriverByID(ctx, d.ID)
				Expect(err).NotTo(HaveOccurred())
				Expect(gotD.Available).To(BeFalse())
				Expect(gotD.VehiclePlate).To(Equal("7ABC123"))
				Expect(gotD.Lat).To(Equal(37.78))
				gotR, err := st.RiderByID(ctx, r.ID)
				Expect(err).NotTo(HaveOccurred())
				Expect(gotR.DefaultPaymentToken).To(Equal(r.DefaultPaymentToken))
				c, err := st.CityByID(ctx, d.City)
				Expect(err).NotTo(HaveOccurred())
				Expect(c.PerKm).To(BeEquivalentTo(130))
				cs, err := st.Cities(ctx)
				Expect(err).NotTo(HaveOccurred())
				Expect(cs).To(HaveLen(1))
			})

			It("answer ErrNotFound for unknown ids", func(ctx SpecContext) {
				_, err := st.TripByID(ctx, "trp_missing")
				Expect(err).To(MatchError(store.ErrNotFound))
				_, err = st.DriverByID(ctx, "drv_missing")
				Expect(err).To(MatchError(store.ErrNotFound))
				_, err = st.RiderByID(ctx, "rdr_missing")
				Expect(err).To(MatchError(store.ErrNotFound))
				_, err = st.CityByID(ctx, "atlantis")
				Expect(err).To(MatchError(store.ErrNotFound))
				_, err = st.APIKeyByHash(ctx, "00")
				Expect(err).To(MatchError(store.ErrNotFound))
			})
		})

		Describe("constraints", func() {
			It("report a repeated id as ErrDuplicate", func(ctx SpecContext) {
				t := createTrip(ctx, st, tripOpts{})
				again := t
				_, err := st.CreateTrip(ctx, again)
				Expect(err).To(MatchError(store.ErrDuplicate))

				d, err := st.DriverByID(ctx, t.DriverID)
				Expect(err).NotTo(HaveOccurred())
				_, err = st.CreateDriver(ctx, d)
				Expect(err).To(MatchError(store.ErrDuplicate))
			})

			It("report a reference to a missing row as ErrInvalidReference", func(ctx SpecContext) {
				_, err := st.CreateDriver(ctx, store.Driver{ID: newID("drv_"), City: "atlantis"})
				Expect(err).To(MatchError(store.ErrInvalidReference))
			})

			It("reject values outside the allowed sets", func(ctx SpecContext) {
				t := createTrip(ctx, st, tripOpts{})
				t.ID, t.Status = newID("trp_"), "teleported"
				_, err := st.CreateTrip(ctx, t)
				Expect(err).To(HaveOccurred())
				Expect(errors.Is(err, store.ErrDuplicate)).To(BeFalse())
			})
		})

		Describe("times", func() {
			It("round-trip at microsecond precision in UTC", func(ctx SpecContext) {
				zone := time.FixedZone("UTC+05:30", 5*3600+1800)
				created := time.Date(2025, 3, 30, 1, 59, 59, 123456789, zone)
				t := createTrip(ctx, st, tripOpts{CreatedAt: created, Status: store.TripStatusCompleted})
				got, err := st.TripByID(ctx, t.ID)
				Expect(err).NotTo(HaveOccurred())

				want := created.UTC().Truncate(time.Microsecond)
				Expect(got.CreatedAt).To(Equal(want)) // Equal: same instant and same location
				Expect(got.CreatedAt.Location()).To(Equal(time.UTC))
				Expect(got.PickupTime).To(Equal(want.Add(5 * time.Minute)))
				Expect(*got.CompletedAt).To(Equal(want.Add(25 * time.Minute)))
				Expect(got.CancelledAt).To(BeNil())
				// What CreateTrip returned is what the database holds.
				Expect(t.CreatedAt).To(Equal(want))
			})

			It("fill automatic timestamps in UTC at microsecond precision", func(ctx SpecContext) {
				r := createRider(ctx, st)
				got, err := st.RiderByID(ctx, r.ID)
				Expect(err).NotTo(HaveOccurred())
				Expect(got.CreatedAt).To(Equal(r.CreatedAt))
				Expect(got.CreatedAt.Location()).To(Equal(time.UTC))
				Expect(got.CreatedAt.Nanosecond() % 1000).To(BeZero())
				Expect(got.CreatedAt).To(BeTemporally("~", time.Now(), time.Minute))
			})
		})

		Describe("API keys", func() {
			newKey := func(role string, subject *string) store.APIKey {
				return store.APIKey{
					ID: newID("key_"), Hash: randomHex(32), Role: role, Subject: subject, Account: "acct_test",
					CreatedAt: time.Now(),
				}
			}
			create := func(ctx context.Context, k store.APIKey) error {
				_, err := st.CreateAPIKey(ctx, store.CreateAPIKeyParams{Key: k})
				return err
			}

			It("are found by hash", func(ctx SpecContext) {
				rider := createRider(ctx, st)
				k := newKey(store.RoleRider, &rider.ID)
				Expect(create(ctx, k)).To(Succeed())
				got, err := st.APIKeyByHash(ctx, k.Hash)
				Expect(err).NotTo(HaveOccurred())
				Expect(got.ID).To(Equal(k.ID))
				Expect(got.Role).To(Equal(store.RoleRider))
				Expect(*got.Subject).To(Equal(rider.ID))
				Expect(got.Account).To(Equal("acct_test"))
				Expect(got.RevokedAt).To(BeNil())
				Expect(got.CreatedAt.Location()).To(Equal(time.UTC))
			})

			It("refuse a repeated id or hash", func(ctx SpecContext) {
				k := newKey(store.RoleAdmin, nil)
				Expect(create(ctx, k)).To(Succeed())
				sameHash := newKey(store.RoleAdmin, nil)
				sameHash.Hash = k.Hash
				Expect(create(ctx, sameHash)).To(MatchError(store.ErrDuplicate))
				sameID := newKey(store.RoleAdmin, nil)
				sameID.ID = k.ID
				Expect(create(ctx, sameID)).To(MatchError(store.ErrDuplicate))
			})

			It("stay readable once revoked, with the first revocation time", func(ctx SpecContext) {
				k := newKey(store.RoleAdmin, nil)
				Expect(create(ctx, k)).To(Succeed())
				before, err := st.APIKeyRevision(ctx)
				Expect(err).NotTo(HaveOccurred())
				revoke := store.RevokeAPIKeyParams{Account: k.Account, ID: k.ID, At: time.Now()}
				revoked, err := st.RevokeAPIKey(ctx, revoke)
				Expect(err).NotTo(HaveOccurred())
				Expect(revoked.RevokedAt).NotTo(BeNil())
				first, err := st.APIKeyByHash(ctx, k.Hash)
				Expect(err).NotTo(HaveOccurred())
				Expect(*first.RevokedAt).To(BeTemporally("~", time.Now(), time.Minute))
				after, err := st.APIKeyRevision(ctx)
				Expect(err).NotTo(HaveOccurred())
				Expect(after).To(Equal(before + 1))

				revoke.At = time.Now().Add(time.Hour)
				_, err = st.RevokeAPIKey(ctx, revoke)
				Expect(err).NotTo(HaveOccurred())
				second, err := st.APIKeyByHash(ctx, k.Hash)
				Expect(err).NotTo(HaveOccurred())
				Expect(*second.RevokedAt).To(Equal(*first.RevokedAt))
				Expect(st.APIKeyRevision(ctx)).To(Equal(after), "a repeated revocation changes nothing")
			})

			It("cannot revoke an unknown key or another account's", func(ctx SpecContext) {
				k := newKey(store.RoleAdmin, nil)
				Expect(create(ctx, k)).To(Succeed())
				_, err := st.RevokeAPIKey(ctx, store.RevokeAPIKeyParams{Account: k.Account, ID: "key_unknown", At: time.Now()})
				Expect(err).To(MatchError(store.ErrNotFound))
				_, err = st.RevokeAPIKey(ctx, store.RevokeAPIKeyParams{Account: "acct_other", ID: k.ID, At: time.Now()})
				Expect(err).To(MatchError(store.ErrNotFound))
				got, err := st.APIKeyByHash(ctx, k.Hash)
				Expect(err).NotTo(HaveOccurred())
				Expect(got.RevokedAt).To(BeNil())
			})

			It("are at most MaxActive active ones per account, however many are created at once", func(ctx SpecContext) {
				account := "acct_" + randomHex(6)
				const limit = 3
				params := func(expires *time.Time) store.CreateAPIKeyParams {
					k := newKey(store.RoleAdmin, nil)
					k.Account, k.ExpiresAt = account, expires
					return store.CreateAPIKeyParams{Key: k, MaxActive: limit}
				}
				// An expired key does not count.
				past := time.Now().Add(-time.Hour)
				expired := params(nil)
				expired.Key.CreatedAt = past.Add(-time.Hour)
				expired.Key.ExpiresAt = &past
				_, err := st.CreateAPIKey(ctx, expired)
				Expect(err).NotTo(HaveOccurred())

				errs := make([]error, 6)
				var wg sync.WaitGroup
				for i := range errs {
					wg.Go(func() { _, errs[i] = st.CreateAPIKey(ctx, params(nil)) })
				}
				wg.Wait()
				var created []string
				for _, err := range errs {
					if err == nil {
						created = append(created, "ok")
					} else {
						Expect(err).To(MatchError(store.ErrLimitReached))
					}
				}
				Expect(created).To(HaveLen(limit))

				// Revoking one makes room for one.
				page, err := st.ListAPIKeys(ctx, account, store.PageParams{Limit: 10})
				Expect(err).NotTo(HaveOccurred())
				_, err = st.RevokeAPIKey(ctx, store.RevokeAPIKeyParams{Account: account, ID: page.Items[0].ID, At: time.Now()})
				Expect(err).NotTo(HaveOccurred())
				_, err = st.CreateAPIKey(ctx, params(nil))
				Expect(err).NotTo(HaveOccurred())
				_, err = st.CreateAPIKey(ctx, params(nil))
				Expect(err).To(MatchError(store.ErrLimitReached))
			})

			It("tell replicas what changed since a revision, creations and revocations in order", func(ctx SpecContext) {
				from, err := st.APIKeyRevision(ctx)
				Expect(err).NotTo(HaveOccurred())
				a, b := newKey(store.RoleAdmin, nil), newKey(store.RoleAdmin, nil)
				Expect(create(ctx, a)).To(Succeed())
				Expect(create(ctx, b)).To(Succeed())
				_, err = st.RevokeAPIKey(ctx, store.RevokeAPIKeyParams{Account: a.Account, ID: a.ID, At: time.Now()})
				Expect(err).NotTo(HaveOccurred())
				to, err := st.APIKeyRevision(ctx)
				Expect(err).NotTo(HaveOccurred())
				Expect(to).To(Equal(from + 3))

				changes, err := st.APIKeyChangesSince(ctx, from, to)
				Expect(err).NotTo(HaveOccurred())
				// a's creation is superseded by its revocation: a key records its latest change.
				Expect(changes).To(HaveLen(2))
				Expect(changes[0].ID).To(Equal(b.ID))
				Expect(changes[0].Hash).To(Equal(b.Hash))
				Expect(changes[0].RevokedAt).To(BeNil())
				Expect(changes[1].ID).To(Equal(a.ID))
				Expect(changes[1].RevokedAt).NotTo(BeNil())
				Expect(changes[1].Revision).To(Equal(to))
				none, err := st.APIKeyChangesSince(ctx, to, to)
				Expect(err).NotTo(HaveOccurred())
				Expect(none).To(BeEmpty())

				expired := newKey(store.RoleAdmin, nil)
				past := time.Now().Add(-time.Minute)
				expired.CreatedAt, expired.ExpiresAt = past.Add(-time.Hour), &past
				Expect(create(ctx, expired)).To(Succeed())
				var hashes []string
				Expect(st.ActiveAPIKeys(ctx, time.Now(), func(batch []store.APIKeyChange) {
					for _, k := range batch {
						hashes = append(hashes, k.Hash)
					}
				})).To(Succeed())
				Expect(hashes).To(ContainElement(b.Hash))
				Expect(hashes).NotTo(ContainElement(a.Hash), "revoked")
				Expect(hashes).NotTo(ContainElement(expired.Hash), "expired")
			})

			It("say whether their account is the platform's", func(ctx SpecContext) {
				Expect(st.IsPlatformAccount(ctx, store.DefaultAccount)).To(BeTrue())
				Expect(st.IsPlatformAccount(ctx, "acct_test")).To(BeFalse())
				Expect(st.IsPlatformAccount(ctx, "acct_"+randomHex(6))).To(BeFalse())
				platform := newKey(store.RoleAdmin, nil)
				platform.Account = store.DefaultAccount
				tenant := newKey(store.RoleAdmin, nil)
				Expect(create(ctx, platform)).To(Succeed())
				Expect(create(ctx, tenant)).To(Succeed())
				Expect(st.APIKeyByHash(ctx, platform.Hash)).To(HaveField("Platform", BeTrue()))
				Expect(st.APIKeyByHash(ctx, tenant.Hash)).To(HaveField("Platform", BeFalse()))
			})

			It("record their latest use, never moving it backwards", func(ctx SpecContext) {
				k := newKey(store.RoleAdmin, nil)
				Expect(create(ctx, k)).To(Succeed())
				at := time.Now().UTC().Truncate(time.Microsecond)
				Expect(st.TouchAPIKeys(ctx, []store.APIKeyUse{{ID: k.ID, At: at}})).To(Succeed())
				Expect(st.TouchAPIKeys(ctx, []store.APIKeyUse{{ID: k.ID, At: at.Add(-time.Hour)}})).To(Succeed())
				got, err := st.APIKeyByID(ctx, k.Account, k.ID)
				Expect(err).NotTo(HaveOccurred())
				Expect(got.LastUsedAt).NotTo(BeNil())
				Expect(*got.LastUsedAt).To(BeTemporally("==", at))
			})
		})

		Describe("transactions", func() {
			It("commit when the callback succeeds", func(ctx SpecContext) {
				var id string
				Expect(st.WithTx(ctx, func(tx *store.Store) error {
					id = createRider(ctx, tx).ID
					return nil
				})).To(Succeed())
				_, err := st.RiderByID(ctx, id)
				Expect(err).NotTo(HaveOccurred())
			})

			It("roll back and pass the error through when it fails", func(ctx SpecContext) {
				var id string
				boom := errors.New("boom")
				err := st.WithTx(ctx, func(tx *store.Store) error {
					id = createRider(ctx, tx).ID
					return boom
				})
				Expect(err).To(MatchError(boom))
				_, err = st.RiderByID(ctx, id)
				Expect(err).To(MatchError(store.ErrNotFound))
			})

			It("let many concurrent writers, through two handles, all succeed", func(ctx SpecContext) {
				// Two Stores on one database stand in for two processes.
				url := e.newDatabase(ctx)
				a, b := openStore(ctx, url), openStore(ctx, url)
				Expect(a.Migrate(ctx)).To(Succeed())
				const writers, each = 8, 10
				var wg sync.WaitGroup
				errs := make(chan error, writers*each)
				for w := range writers {
					st := []*store.Store{a, b}[w%2]
					wg.Go(func() {
						for range each {
							errs <- st.WithTx(ctx, func(tx *store.Store) error {
								r, err := tx.CreateRider(ctx, store.Rider{ID: newID("rdr_"), Name: "Concurrent", Rating: 5})
								if err != nil {
									return err
								}
								_, err = tx.RiderByID(ctx, r.ID)
								return err
							})
						}
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					Expect(err).NotTo(HaveOccurred())
				}
				var n int64
				Expect(a.TestDB().WithContext(ctx).Model(&store.Rider{}).Count(&n).Error).To(Succeed())
				Expect(n).To(BeEquivalentTo(writers * each))
			})

			It("keep store sentinels from inside", func(ctx SpecContext) {
				err := st.WithTx(ctx, func(tx *store.Store) error {
					_, err := tx.TripByID(ctx, "trp_missing")
					return err
				})
				Expect(err).To(MatchError(store.ErrNotFound))
			})

			// On SQLite the transaction holds the only connection, so the outside cannot
			// even ask; the spec is PostgreSQL's alone.
			if e.name == "SQLite" {
				return
			}
			It("do not leak uncommitted rows to the outside", func(ctx SpecContext) {
				Expect(st.WithTx(ctx, func(tx *store.Store) error {
					r := createRider(ctx, tx)
					outside, cancel := context.WithTimeout(ctx, 5*time.Second)
					defer cancel()
					_, err := st.RiderByID(outside, r.ID)
					Expect(err).To(MatchError(store.ErrNotFound))
					return nil
				})).To(Succeed())
			})
		})
	})
})
