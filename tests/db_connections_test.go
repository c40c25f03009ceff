package tests

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", to administer the server
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server"
	"github.com/rideapi/ride/store"
)

// cappedDatabase is a fresh database owned by a role of its own, whose connections the spec can
// limit (a superuser's cannot be), the way a PostgreSQL shared by many replicas runs out of
// them. It returns the database's URL and the role's name; both are dropped after the spec.
func cappedDatabase(ctx context.Context, admin *sql.DB) (string, string) {
	GinkgoHelper()
	base, err := url.Parse(os.Getenv("TEST_DATABASE_URL"))
	Expect(err).NotTo(HaveOccurred())
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	name := "ride_capped_" + hex.EncodeToString(suffix[:])
	_, err = admin.ExecContext(ctx, "CREATE ROLE "+name+" LOGIN")
	Expect(err).NotTo(HaveOccurred())
	_, err = admin.ExecContext(ctx, "CREATE DATABASE "+name+" OWNER "+name)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		_, _ = admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
		_, _ = admin.Exec("DROP ROLE IF EXISTS " + name)
	})
	u := *base
	u.User = url.User(name)
	u.Path = "/" + name
	return u.String(), name
}

var _ = Describe("A database with no connection to spare", Label("postgres"), func() {
	It("answers 503 for a request it refuses, and every position answered 200 reaches the trip's followers", SpecTimeout(3*time.Minute), func(ctx SpecContext) {
		if os.Getenv("TEST_DATABASE_URL") == "" {
			Skip("needs PostgreSQL (TEST_DATABASE_URL)")
		}
		admin, err := sql.Open("pgx", os.Getenv("TEST_DATABASE_URL"))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(admin.Close)
		dbURL, role := cappedDatabase(ctx, admin)

		st, err := store.Open(ctx, dbURL)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(st.Close)
		Expect(st.Migrate(ctx)).To(Succeed())
		logs := &lockedBuffer{}
		h := serveStore(st, server.Config{}, slog.New(slog.NewJSONHandler(logs, nil)))

		By("trips on their way, each followed by its rider, each driver known to the server")
		const drivers, reports = 12, 15
		trips := make([]liveTrip, drivers)
		seen := make([]map[string]bool, drivers)
		var seenMu sync.Mutex
		streams := make([]*tripStream, drivers)
		for i := range trips {
			trips[i] = h.bookLiveTrip()
			streams[i] = h.FollowTrip(trips[i].riderKey, trips[i].trip.Id, "")
			Expect(streams[i].Status).To(Equal(http.StatusOK))
			streams[i].Next()
		}
		// Reports from now on are newer than any position the drivers have; the last is 15 s
		// ahead, within the 30 s a device's clock may be.
		start := time.Now().UTC().Truncate(time.Millisecond)
		for i := range trips {
			h.reportPosition(trips[i].driverKey, trips[i].driver.ID, map[string]any{"lat": trips[i].city.CenterLat, "lng": trips[i].city.CenterLng}, start)
			stream := streams[i]
			seen[i] = map[string]bool{}
			go func() {
				defer GinkgoRecover()
				for m := range stream.Messages {
					if loc, ok := m.Update["driver_location"].(map[string]any); ok {
						seenMu.Lock()
						seen[i][loc["recorded_at"].(string)] = true
						seenMu.Unlock()
					}
				}
			}()
		}

		By("the role may open one connection more than it holds now")
		var open int
		Expect(admin.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE usename = $1", role).Scan(&open)).To(Succeed())
		_, err = admin.ExecContext(ctx, fmt.Sprintf("ALTER ROLE %s CONNECTION LIMIT %d", role, open+1))
		Expect(err).NotTo(HaveOccurred())

		By("every driver reports at once, retrying a 503 as a driver's app does")
		var mu sync.Mutex
		acknowledged := make([][]string, drivers)
		refused := 0
		var wg sync.WaitGroup
		for i := range trips {
			wg.Go(func() {
				defer GinkgoRecover()
				t := trips[i]
				for j := 1; j <= reports; j++ {
					at := start.Add(time.Duration(j) * time.Second)
					for {
						res := h.Do(Request{Method: http.MethodPost, Path: "/v1/drivers/" + t.driver.ID + "/positions", Key: t.driverKey,
							Body: map[string]any{"positions": []any{map[string]any{"lat": t.city.CenterLat, "lng": t.city.CenterLng,
								"recorded_at": at.Format(time.RFC3339Nano)}}}})
						if res.Status == http.StatusServiceUnavailable {
							ExpectProblem(res, http.StatusServiceUnavailable, "unavailable")
							mu.Lock()
							refused++
							mu.Unlock()
							continue
						}
						Expect(res.Status).To(Equal(http.StatusOK), "%s", res.Body)
						position := res.JSON()["position"].(map[string]any)
						recorded, err := time.Parse(time.RFC3339Nano, position["recorded_at"].(string))
						Expect(err).NotTo(HaveOccurred())
						Expect(recorded.Equal(at)).To(BeTrue(), "reports of one driver go one after another")
						mu.Lock()
						acknowledged[i] = append(acknowledged[i], position["recorded_at"].(string))
						mu.Unlock()
						break
					}
				}
			})
		}
		wg.Wait()
		AddReportEntry("answers 503 while the database had no connection to spare", refused)
		Expect(refused).To(BeNumerically(">", 0), "the database refused connections:\n%s", logs.String())

		By("every acknowledged position reached the trip's stream")
		for i := range trips {
			Eventually(func() []string {
				seenMu.Lock()
				defer seenMu.Unlock()
				var missing []string
				for _, at := range acknowledged[i] {
					if !seen[i][at] {
						missing = append(missing, at)
					}
				}
				return missing
			}).WithTimeout(20*time.Second).WithPolling(50*time.Millisecond).Should(BeEmpty(), "trip %d", i)
		}
		Expect(logs.String()).NotTo(ContainSubstring("database unavailable"), "refused connections are no outage")
	})
})
