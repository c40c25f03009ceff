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
	"github.com/rideapi/ride/store"
)

// StreamTripUpdates follows a trip live, as Server-Sent Events, for the callers who may read
// the trip.
func (s *Server) StreamTripUpdates(ctx context.Context, req gen.StreamTripUpdatesRequestObject) (gen.StreamTripUpdatesResponseObject, error) {
	trip, err := s.visibleTrip(ctx, req.TripId)
	if err != nil {
		return nil, err
	}
	caller := auth.PrincipalFrom(ctx)
	if pipeline.MediaType(ctx) != "text/event-stream" {
		// The current state once, for clients that poll.
		current, err := s.currentLiveState(ctx, trip.ID)
		if err != nil {
			return nil, err
		}
		return gen.StreamTripUpdates200JSONResponse{Body: current.viewedBy(caller)}, nil
	}
	// A stream outlives the request's bound on its wait for the database (each of its reads
	// is bounded alone, currentLiveState), but not its key: it holds a session under the
	// caller's key, which ends when the key is revoked (on any replica) or expires, with a
	// final `end` message that says so.
	held, release, err := s.auth.Hold(store.FromPrimary(store.WithoutDeadline(context.WithoutCancel(ctx))), caller)
	if err != nil {
		return nil, err
	}
	stream := &tripStream{s: s, ctx: held, release: release, tripID: trip.ID, caller: caller}
	if req.Params.LastEventID != nil {
		stream.since, _ = parseLiveUpdateID(*req.Params.LastEventID) // an id of ours, or nothing
	}
	return stream, nil
}

// tripStream writes one trip's live updates until the trip is final, the client leaves or
// the server stops.
type tripStream struct {
	s       *Server
	ctx     context.Context // ends with the key's session (auth.Authenticator.Hold)
	release context.CancelFunc
	tripID  string
	caller  auth.Principal
	since   liveVersion // the version of the last state the client has (Last-Event-ID)
}

func (t *tripStream) VisitStreamTripUpdatesResponse(w http.ResponseWriter) error {
	rc := http.NewResponseController(w)
	started := false
	start := func() {
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Accel-Buffering", "no") // nginx would hold the stream back otherwise
		w.WriteHeader(http.StatusOK)
		_ = rc.SetWriteDeadline(time.Time{}) // the server's write timeout is for answers, not streams
		started = true
	}
	heartbeat := time.NewTicker(t.s.liveHeartbeat)
	defer heartbeat.Stop()
	defer t.release()
	ctx := t.ctx
	ready := func() {
		if !started {
			start()
			_ = rc.Flush() // the client knows it is following, even with nothing new to send
		}
	}
	err := t.s.watchTrip(ctx, t.tripID, t.caller, t.since, heartbeat.C, ready, func(u *gen.TripLiveUpdate, id string) error {
		if !started {
			start()
		}
		if u == nil {
			if _, err := w.Write([]byte(": heartbeat\n\n")); err != nil {
				return err
			}
			return rc.Flush()
		}
		data, err := json.Marshal(u)
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
		return rc.Flush()
	})
	code, detail, keyEnded := auth.SessionEnd(ctx)
	if !started {
		if err != nil && !keyEnded {
			return err // nothing sent yet: the error boundary answers
		}
		start()
	}
	if keyEnded {
		// The client must not reconnect with this key: say why the stream ends.
		data, _ := json.Marshal(streamEnd{Code: code, Detail: detail})
		_, _ = w.Write(append(append([]byte("event: end\ndata: "), data...), "\n\n"...))
	}
	_ = rc.Flush()
	return nil // once streaming, an end is only an end: the client reconnects with Last-Event-ID
}

// watchTrip follows a trip's live state for caller: emit gets the current state (unless the
// caller has it, at version since), then ready is called, then emit gets each newer state
// with its message id, and nil at every heartbeat, until the trip is final, ctx's client
// leaves, the server stops or emit fails. Members the caller may not see are left out.
func (s *Server) watchTrip(ctx context.Context, tripID string, caller auth.Principal, since liveVersion,
	heartbeat <-chan time.Time, ready func(), emit func(u *gen.TripLiveUpdate, id string) error) error {
	follower, stop := s.live.follow(tripID)
	defer stop()
	sent := since
	send := func(u liveUpdate) (final bool, err error) {
		final = ride.TripStatus(u.Status).Final()
		version := versionOf(u.TripLiveUpdate)
		if !version.newerThan(sent) {
			return final, nil // the caller has it, or a newer state, already
		}
		update := u.viewedBy(caller)
		if err := emit(&update, version.String()); err != nil {
			return final, err
		}
		sent = version
		return final, nil
	}
	// The current state is read after following: an update committed in between arrives as
	// well, and is sent only if it is newer.
	current, err := s.currentLiveState(ctx, tripID)
	if err != nil {
		return err
	}
	if final, err := send(current); err != nil || final {
		return err
	}
	if ready != nil {
		ready()
	}
	for {
		select {
		case <-pipeline.ClientGone(ctx):
			return nil
		case <-ctx.Done():
			return nil
		case <-s.sessionsCtx.Done():
			return nil
		case <-heartbeat:
			if err := emit(nil, ""); err != nil {
				return err
			}
		case u := <-follower.updates:
			if follower.takeLagged() || u.TripId == "" {
				if u, err = s.currentLiveState(ctx, tripID); err != nil {
					return err
				}
			}
			if final, err := send(u); err != nil || final {
				return err
			}
		}
	}
}

// currentLiveState reads a trip's live state from the store, waiting for the database at
// most the request's bound, or the configured one for a stream, which reads it again and
// again long after its request.
func (s *Server) currentLiveState(ctx context.Context, tripID string) (liveUpdate, error) {
	if _, bounded := store.Deadline(ctx); !bounded {
		ctx = store.WithDeadline(ctx, time.Now().Add(s.cfg.databaseTimeout()))
	}
	trip, err := s.store.TripByID(ctx, tripID)
	if err != nil {
		return liveUpdate{}, err
	}
	return liveUpdateOf(&trip), nil
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

// streamEnd is the data of a stream's final `end` message (the document's x-events.end).
type streamEnd struct {
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

var _ gen.StreamTripUpdatesResponseObject = (*tripStream)(nil)
