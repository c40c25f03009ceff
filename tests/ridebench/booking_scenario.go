package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/rideapi/ride/server/ride"
)

// bookingName is the booking scenario's name in the report (and for -only).
const bookingName = "booking: estimate + POST /v1/rides"

// bookingScenario books one sample trip through the server's own code to capture its SQL, and
// returns the scenario.
func (b *bench) bookingScenario(ctx context.Context, warm *http.Request) (*scenario, error) {
	f := b.fleet
	sampleCity, from, to := f.route(rand.New(rand.NewPCG(28, 2)))
	sampleRider, sampleType, sampleKey := f.rider(), rideTypes[0], ride.NewID("bench")
	sampleAt := time.Now()
	estSQL, rideSQL, sampleTrip, driverID, err := b.sampleBooking(ctx, from, to, sampleType, sampleRider, sampleKey, warm)
	if err != nil {
		return nil, err
	}
	if err := writes(rideSQL, "idempotency_records", "drivers", "trips", "events"); err != nil {
		return nil, fmt.Errorf("POST /v1/rides: %w", err)
	}
	stmts := append(slices.Clip(estSQL), rideSQL...)
	pick, err := claimRead(stmts, driverID)
	if err != nil {
		return nil, err
	}

	// A second sample books from a pickup that no driver is near: its SQL holds the look at the
	// whole city that follows a first look finding nobody, which the reference runs in turn
	// whenever its first look finds nobody, as the server does.
	farAt := time.Now()
	far := ride.Point{Lat: sampleCity.lat + farPickup/111_195.0, Lng: sampleCity.lng}
	farTo := ride.Point{Lat: sampleCity.lat + farDropoff/111_195.0, Lng: sampleCity.lng}
	farRider := f.rider()
	_, farSQL, _, farDriverID, err := b.sampleBooking(ctx, far, farTo, sampleType, farRider, ride.NewID("bench"), nil)
	if err != nil {
		return nil, err
	}
	farPick, err := claimRead(farSQL, farDriverID)
	if err != nil {
		return nil, err
	}
	if farPick == 0 || farSQL[farPick-1].sql != stmts[pick].sql {
		return nil, errors.New("sample booking far from every driver: its claim is not a first look like the near sample's, then another")
	}
	// The look at the whole city, with the near sample's values, so that a replay swaps them
	// as it swaps those of the rest.
	cityWide := farSQL[farPick]
	cityWide.vars = (&substitution{strs: []string{farRider, sampleRider},
		floats: map[float64]float64{far.Lat: from.Lat, far.Lng: from.Lng},
		shift:  sampleAt.Sub(farAt)}).apply(cityWide.vars)

	generated := generatedIDs(stmts, ride.PrefixEstimate, ride.PrefixEvent)
	return &scenario{
		name: bookingName, sql: stmts,
		refNote:    "the estimate's statements, then the booking's: the idempotency claim, and in one transaction the estimate (locked), the rider, the nearest free online driver (FOR UPDATE SKIP LOCKED, the driver taken from its row), the claim, the trip, the event and the stored answer",
		perRequest: "one booking is two requests, the estimate and the ride",
		http: func(ctx context.Context, w *worker) error {
			_, from, to := f.route(w.rng)
			body, err := b.do(w, b.request(http.MethodPost, "/v1/fare-estimates",
				estimateBody(from, to, rideTypes[w.rng.IntN(len(rideTypes))])), http.StatusCreated)
			if err != nil {
				return err
			}
			var est struct {
				ID string `json:"estimate_id"`
			}
			if err := json.Unmarshal(body, &est); err != nil {
				return err
			}
			req := b.request(http.MethodPost, "/v1/rides", map[string]any{"estimate_id": est.ID, "rider_id": f.rider()})
			req.Header.Set("Idempotency-Key", ride.NewID("bench"))
			if body, err = b.do(w, req, http.StatusCreated); err != nil {
				return err
			}
			var trip struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(body, &trip); err != nil {
				return err
			}
			f.book(w.t.addr, trip.ID)
			return nil
		},
		reference: func(ctx context.Context, w *worker) error {
			c, pickup, dropoff := f.route(w.rng)
			tripID := ride.NewID(ride.PrefixTrip)
			sub := &substitution{
				strs: []string{sampleCity.id, c.id, sampleRider, f.rider(), sampleKey, ride.NewID("bench"),
					sampleTrip, tripID, sampleType, rideTypes[w.rng.IntN(len(rideTypes))]},
				floats: map[float64]float64{from.Lat: pickup.Lat, from.Lng: pickup.Lng, to.Lat: dropoff.Lat, to.Lng: dropoff.Lng},
				shift:  time.Since(sampleAt),
				bind:   &binding{stmt: pick, column: "id", old: driverID, otherwise: &cityWide},
			}
			sub.freshIDs(generated)
			if _, err := replay(ctx, b.pool, stmts, sub, -1); err != nil {
				return err
			}
			f.book(b.o.addr, tripID)
			return nil
		},
		around: func(ctx context.Context, s side) (func(), error) {
			addr, db := b.o.addr, b.bookingDBs[0]
			if s == sideCompare {
				addr, db = b.o.compareAddr, b.bookingDBs[len(b.bookingDBs)-1]
			}
			if err := db.refresh(ctx); err != nil {
				return nil, err
			}
			stop := make(chan struct{})
			reported := f.report(addr, stop)
			return func() {
				close(stop)
				sent, failed, err := reported()
				if err != nil {
					log.Printf("booking: %d of %d position reports failed, the first: %v", failed, sent, err)
				}
				n, err := f.complete(ctx, addr, b.key, b.o.concurrency)
				if err != nil {
					log.Printf("booking: completing the run's trips on %s: %v", addr, err)
				}
				log.Printf("booking: %d position reports during the run; %d trips completed after it", sent, n)
			}, nil
		},
	}, nil
}

// claimRead is the index of the statement a booking's driver comes from: the last statement
// on drivers before the driver's id first appears in a statement's values.
func claimRead(stmts []statement, driverID string) (int, error) {
	pick := -1
	for i, st := range stmts {
		if slices.ContainsFunc(st.vars, func(v any) bool { s, ok := v.(string); return ok && s == driverID }) {
			break
		}
		if strings.Contains(st.sql, "drivers") {
			pick = i
		}
	}
	if pick < 0 {
		return 0, fmt.Errorf("sample booking: no statement on drivers before the claimed driver %s is written", driverID)
	}
	return pick, nil
}

// sampleBooking books one trip from from to to through the server's own code: the estimate,
// then the ride with key. It returns the SQL of each, the trip (which the fleet completes with
// the others) and the driver the booking took.
func (b *bench) sampleBooking(ctx context.Context, from, to ride.Point, rideType, riderID, key string, warm *http.Request) (estSQL, rideSQL []statement, tripID, driverID string, err error) {
	estSQL, answer, err := b.sampler.captureAnswer(ctx, inProcess(b.request(http.MethodPost, "/v1/fare-estimates",
		estimateBody(from, to, rideType))), warm)
	if err != nil {
		return nil, nil, "", "", err
	}
	var est struct {
		ID string `json:"estimate_id"`
	}
	if err := json.Unmarshal(answer, &est); err != nil || est.ID == "" {
		return nil, nil, "", "", fmt.Errorf("sample estimate: no estimate_id in %s", answer)
	}
	rideReq := b.request(http.MethodPost, "/v1/rides", map[string]any{"estimate_id": est.ID, "rider_id": riderID})
	rideReq.Header.Set("Idempotency-Key", key)
	rideSQL, answer, err = b.sampler.captureAnswer(ctx, inProcess(rideReq), nil)
	if err != nil {
		return nil, nil, "", "", err
	}
	var trip struct {
		ID     string `json:"id"`
		Driver struct {
			ID string `json:"id"`
		} `json:"driver_summary"`
	}
	if err := json.Unmarshal(answer, &trip); err != nil || trip.ID == "" || trip.Driver.ID == "" {
		return nil, nil, "", "", fmt.Errorf("sample booking: no trip id or driver in %s", answer)
	}
	b.fleet.book(b.o.addr, trip.ID)
	return estSQL, rideSQL, trip.ID, trip.Driver.ID, nil
}
