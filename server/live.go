package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/app"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// Live trip updates. Every change a rider's app shows live (a status change, a position of
// the trip's driver, the ETA that follows) is published inside the transaction that made it
// (store.PublishTripUpdate) and reaches every replica's liveHub through
// store.FollowTripUpdates; the hub hands it to the streams following that trip, on
// Server-Sent Events or GraphQL subscriptions.

// liveUpdate is a trip's live state as published: everything any viewer may see. Each stream
// removes what its caller may not (driverLocation).
type liveUpdate struct {
	gen.TripLiveUpdate
	// RiderID decides who sees driver_location; not part of the answer.
	RiderID string `json:"rider_id"`
}

// liveUpdateOf is the live state of t.
func liveUpdateOf(t *store.Trip) liveUpdate {
	u := liveUpdate{RiderID: t.RiderID, TripLiveUpdate: gen.TripLiveUpdate{
		TripId: t.ID, Status: gen.TripStatus(t.Status), UpdatedAt: t.UpdatedAt.UTC(),
	}}
	if eta := liveETA(t); eta != nil {
		minutes := int32(*eta)
		u.EtaMinutes = &minutes
	}
	if p := t.Driver.Position; p != nil && ride.TripStatus(t.Status).Active() {
		at := positionView(*p)
		u.DriverLocation = &at
	}
	return u
}

// viewedBy is u as caller may see it: driver_location for the trip's rider and admins only.
func (u liveUpdate) viewedBy(caller auth.Principal) gen.TripLiveUpdate {
	update := u.TripLiveUpdate
	if !app.LocatesDriverOf(caller, u.RiderID) {
		update.DriverLocation = nil
	}
	return update
}

// publishTripUpdate sends trip's live state to its followers when tx commits.
func publishTripUpdate(ctx context.Context, tx *store.Store, trip *store.Trip, at time.Time) error {
	payload, err := json.Marshal(liveUpdateOf(trip))
	if err != nil {
		return err
	}
	return tx.PublishTripUpdate(ctx, payload, at)
}

// liveFollower is one stream's subscription to a trip. updates holds what has not been sent
// yet; a follower that falls behind by more than its buffer is told to read the trip again
// (lagged) rather than slowing everyone down.
type liveFollower struct {
	tripID  string
	updates chan liveUpdate
	mu      sync.Mutex
	lagged  bool
}

// takeLagged reports whether updates were dropped since the last call.
func (f *liveFollower) takeLagged() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	lagged := f.lagged
	f.lagged = false
	return lagged
}

// liveHub hands the updates this replica hears to the streams that follow their trips.
type liveHub struct {
	log *slog.Logger

	mu        sync.Mutex
	followers map[string]map[*liveFollower]struct{}
}

func newLiveHub(log *slog.Logger) *liveHub {
	return &liveHub{log: log, followers: map[string]map[*liveFollower]struct{}{}}
}

// liveFollowerBuffer is how many updates a stream may fall behind before it reads the trip
// again instead.
const liveFollowerBuffer = 32

// follow subscribes to the updates of a trip; call the returned function to stop.
func (h *liveHub) follow(tripID string) (*liveFollower, func()) {
	f := &liveFollower{tripID: tripID, updates: make(chan liveUpdate, liveFollowerBuffer)}
	h.mu.Lock()
	set := h.followers[tripID]
	if set == nil {
		set = map[*liveFollower]struct{}{}
		h.followers[tripID] = set
	}
	set[f] = struct{}{}
	h.mu.Unlock()
	return f, func() {
		h.mu.Lock()
		delete(set, f)
		if len(set) == 0 {
			delete(h.followers, tripID)
		}
		h.mu.Unlock()
	}
}

// deliver is store.FollowTripUpdates' callback: one published payload, or "" when updates may
// have been missed (every follower reads its trip again).
func (h *liveHub) deliver(payload string) {
	if payload == "" {
		h.mu.Lock()
		for _, set := range h.followers {
			for f := range set {
				h.push(f, liveUpdate{})
			}
		}
		h.mu.Unlock()
		return
	}
	var u liveUpdate
	if err := json.Unmarshal([]byte(payload), &u); err != nil {
		h.log.Error("unreadable trip update", slog.String("error", err.Error()))
		return
	}
	h.mu.Lock()
	for f := range h.followers[u.TripId] {
		h.push(f, u)
	}
	h.mu.Unlock()
}

// push queues u for f without waiting; an empty u (or a full queue) marks f lagged.
func (h *liveHub) push(f *liveFollower, u liveUpdate) {
	if u.TripId != "" {
		select {
		case f.updates <- u:
			return
		default:
		}
	}
	f.mu.Lock()
	f.lagged = true
	f.mu.Unlock()
	select {
	case f.updates <- liveUpdate{}: // wakes the stream; it reads the trip
	default: // a wake-up is queued already
	}
}

// run follows the store's trip updates until ctx ends.
func (h *liveHub) run(ctx context.Context, st *store.Store) {
	if err := st.FollowTripUpdates(ctx, h.deliver); err != nil && ctx.Err() == nil {
		h.log.Error("trip updates stopped", slog.String("error", err.Error()))
	}
}
