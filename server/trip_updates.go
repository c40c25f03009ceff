package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/pipeline"
	"github.com/rideapi/ride/server/ride"
)

// StreamTripUpdates follows a trip live, as Server-Sent Events, for the callers who may read
// the trip.
func (s *Server) StreamTripUpdates(ctx context.Context, req gen.StreamTripUpdatesRequestObject) (gen.StreamTripUpdatesResponseObject, error) {
	trip, err := s.visibleTrip(ctx, req.TripId)
	if err != nil {
		return nil, err
	}
	stream := &tripStream{s: s, ctx: ctx, tripID: trip.ID, caller: auth.PrincipalFrom(ctx)}
	if req.Params.LastEventID != nil {
		stream.lastSent = *req.Params.LastEventID
	}
	return stream, nil
}

// tripStream writes one trip's live updates until the trip is final, the client leaves or
// the server stops.
type tripStream struct {
	s        *Server
	ctx      context.Context
	tripID   string
	caller   auth.Principal
	lastSent string // the id of the last message the client has
}

func (t *tripStream) VisitStreamTripUpdatesResponse(w http.ResponseWriter) error {
	follower, stop := t.s.live.follow(t.tripID)
	defer stop()
	// The current state is read after following: an update committed in between arrives as
	// well, and is sent only if it is newer.
	current, err := t.current()
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx would hold the stream back otherwise
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // the server's write timeout is for answers, not streams

	if err := t.send(w, current); err != nil {
		return nil // the client is gone
	}
	if err := rc.Flush(); err != nil || ride.TripStatus(current.Status).Final() {
		return nil
	}
	heartbeat := time.NewTicker(t.s.liveHeartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case <-pipeline.ClientGone(t.ctx):
			return nil
		case <-t.s.backgroundCtx.Done():
			return nil
		case <-heartbeat.C:
			if _, err := w.Write([]byte(": heartbeat\n\n")); err != nil {
				return nil
			}
		case u := <-follower.updates:
			if follower.takeLagged() || u.TripId == "" {
				if u, err = t.current(); err != nil {
					return nil // the stream ends; the client reconnects with Last-Event-ID
				}
			}
			if err := t.send(w, u); err != nil {
				return nil
			}
			if ride.TripStatus(u.Status).Final() {
				_ = rc.Flush()
				return nil
			}
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
	}
}

// current reads the trip's live state from the store.
func (t *tripStream) current() (liveUpdate, error) {
	trip, err := t.s.store.TripByID(t.ctx, t.tripID)
	if err != nil {
		return liveUpdate{}, err
	}
	return liveUpdateOf(&trip), nil
}

// send writes u as one message unless the client has it already.
func (t *tripStream) send(w http.ResponseWriter, u liveUpdate) error {
	id := liveUpdateID(u.TripLiveUpdate)
	if id == t.lastSent {
		return nil
	}
	update := u.TripLiveUpdate
	if !t.caller.IsAdmin() && !t.caller.Is(auth.RoleRider, u.RiderID) {
		update.DriverLocation = nil
	}
	data, err := json.Marshal(update)
	if err != nil {
		return err
	}
	msg := make([]byte, 0, len(data)+64)
	msg = append(msg, "event: trip\nid: "...)
	msg = append(msg, id...)
	msg = append(msg, "\ndata: "...)
	msg = append(msg, data...)
	msg = append(msg, "\n\n"...)
	if _, err := w.Write(msg); err != nil {
		return err
	}
	t.lastSent = id
	return nil
}

// liveUpdateID names a live state: the trip's update time and its driver's position time, in
// microseconds. Equal ids are equal states, so a reconnecting client is sent nothing twice.
func liveUpdateID(u gen.TripLiveUpdate) string {
	id := strconv.FormatInt(u.UpdatedAt.UnixMicro(), 10)
	if u.DriverLocation != nil {
		id += "-" + strconv.FormatInt(u.DriverLocation.RecordedAt.UnixMicro(), 10)
	}
	return id
}

var _ gen.StreamTripUpdatesResponseObject = (*tripStream)(nil)
