package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
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
		stream.sent, _ = parseLiveUpdateID(*req.Params.LastEventID) // an id of ours, or nothing
	}
	return stream, nil
}

// tripStream writes one trip's live updates until the trip is final, the client leaves or
// the server stops.
type tripStream struct {
	s      *Server
	ctx    context.Context
	tripID string
	caller auth.Principal
	sent   liveVersion // the version of the last state the client has
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

// send writes u as one message unless the client has it, or a newer state, already: an
// update published before the stream began may arrive after the state read at its start.
func (t *tripStream) send(w http.ResponseWriter, u liveUpdate) error {
	version := versionOf(u.TripLiveUpdate)
	if !version.newerThan(t.sent) {
		return nil
	}
	id := version.String()
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
	t.sent = version
	return nil
}

// liveVersion orders a trip's live states: by the trip's update time, then by its driver's
// position time, in microseconds. It is the messages' id, so a reconnecting client is sent
// nothing it has.
type liveVersion struct{ updated, position int64 }

func versionOf(u gen.TripLiveUpdate) liveVersion {
	v := liveVersion{updated: u.UpdatedAt.UnixMicro()}
	if u.DriverLocation != nil {
		v.position = u.DriverLocation.RecordedAt.UnixMicro()
	}
	return v
}

func (v liveVersion) newerThan(o liveVersion) bool {
	return v.updated > o.updated || (v.updated == o.updated && v.position > o.position)
}

func (v liveVersion) String() string {
	return strconv.FormatInt(v.updated, 10) + "-" + strconv.FormatInt(v.position, 10)
}

// parseLiveUpdateID reads a message id back; false for anything else.
func parseLiveUpdateID(id string) (liveVersion, bool) {
	updated, position, ok := strings.Cut(id, "-")
	if !ok {
		return liveVersion{}, false
	}
	u, err1 := strconv.ParseInt(updated, 10, 64)
	p, err2 := strconv.ParseInt(position, 10, 64)
	if err1 != nil || err2 != nil {
		return liveVersion{}, false
	}
	return liveVersion{updated: u, position: p}, true
}

var _ gen.StreamTripUpdatesResponseObject = (*tripStream)(nil)
