package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/app"
	"github.com/rideapi/ride/server/auth"
	graphqlapi "github.com/rideapi/ride/server/graphql"
	"github.com/rideapi/ride/server/pipeline"
	"github.com/rideapi/ride/server/problem"
	"github.com/rideapi/ride/store"
)

// The HTTP side of /v1/graphql: the query interface itself is server/graphql.

// QueryGraphQL runs a query sent as URL parameters (GET /v1/graphql).
func (s *Server) QueryGraphQL(ctx context.Context, req gen.QueryGraphQLRequestObject) (gen.QueryGraphQLResponseObject, error) {
	a, err := s.graphql.Get(ctx, req.Params)
	return graphQLAnswer{a, graphQLContentType(ctx)}, err
}

// ExecuteGraphQL runs a document sent as a JSON body (POST /v1/graphql).
func (s *Server) ExecuteGraphQL(ctx context.Context, req gen.ExecuteGraphQLRequestObject) (gen.ExecuteGraphQLResponseObject, error) {
	a, err := s.graphql.Post(ctx, req.Body)
	return graphQLAnswer{a, graphQLContentType(ctx)}, err
}

// mediaGraphQLResponse is the media type of the GraphQL over HTTP specification.
const mediaGraphQLResponse = "application/graphql-response+json"

var headerGraphQLResponse = []string{mediaGraphQLResponse}

// graphQLContentType is the media type the client prefers: application/json, or
// application/graphql-response+json (GraphQL over HTTP), with the same body and statuses.
func graphQLContentType(ctx context.Context) []string {
	if pipeline.MediaType(ctx) == mediaGraphQLResponse {
		return headerGraphQLResponse
	}
	return headerJSON
}

// graphQLAnswer writes an encoded envelope as it is: the generated typed responses would
// decode data into a map, which loses the field order the document asked for.
type graphQLAnswer struct {
	graphqlapi.Answer
	contentType []string
}

func (a graphQLAnswer) write(w http.ResponseWriter) error {
	w.Header()["Content-Type"] = a.contentType
	w.WriteHeader(a.Status)
	_, err := w.Write(a.Body)
	return err
}

// VisitQueryGraphQLResponse writes the answer to GET /v1/graphql.
func (a graphQLAnswer) VisitQueryGraphQLResponse(w http.ResponseWriter) error { return a.write(w) }

// VisitExecuteGraphQLResponse writes the answer to POST /v1/graphql.
func (a graphQLAnswer) VisitExecuteGraphQLResponse(w http.ResponseWriter) error { return a.write(w) }

// graphQLHost gives the query interface the request's store, the caller's rules and the
// request id, as every REST handler has them.
type graphQLHost struct{ s *Server }

func (h graphQLHost) Store(ctx context.Context) *store.Store { return h.s.storeFor(ctx) }

func (h graphQLHost) ETAMinutes(t *store.Trip) *int { return liveETA(t) }

func (h graphQLHost) TripReach(ctx context.Context) store.TripReach {
	return app.TripReach(auth.PrincipalFrom(ctx))
}

func (h graphQLHost) MayReadTrip(ctx context.Context, t store.Trip) bool {
	return app.CanSeeTrip(auth.PrincipalFrom(ctx), t)
}

func (h graphQLHost) RequestID(ctx context.Context) string { return pipeline.RequestID(ctx) }

func (h graphQLHost) Account(ctx context.Context) string { return auth.PrincipalFrom(ctx).Account }

func (h graphQLHost) DriverLocation(ctx context.Context, t *store.Trip) *store.DriverPosition {
	if !app.SeesDriverLocation(t, auth.PrincipalFrom(ctx)) {
		return nil
	}
	return t.Driver.Position
}

func (h graphQLHost) FollowTrip(ctx context.Context, t store.Trip) <-chan graphqlapi.LiveTrip {
	out := make(chan graphqlapi.LiveTrip)
	go func() {
		defer close(out)
		_ = h.s.watchTrip(ctx, t.ID, auth.PrincipalFrom(ctx), liveVersion{}, nil, nil, func(u *gen.TripLiveUpdate, _ string) error {
			if u == nil {
				return nil
			}
			live := graphqlapi.LiveTrip{TripID: u.TripId, Status: string(u.Status), UpdatedAt: u.UpdatedAt}
			if u.EtaMinutes != nil {
				eta := int(*u.EtaMinutes)
				live.ETAMinutes = &eta
			}
			if p := u.DriverLocation; p != nil {
				live.DriverLocation = &store.DriverPosition{Lat: p.Lat, Lng: p.Lng, Heading: p.Heading, Speed: p.Speed, RecordedAt: p.RecordedAt}
			}
			select {
			case out <- live:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	return out
}

// graphQLSockets serves GraphQL subscriptions: a WebSocket upgrade of GET /v1/graphql
// (graphql-transport-ws), which has come through the pipeline like any request (the gate has
// checked the upgrade, and leaves its key to the socket's first message). It is the route's
// own middleware: a plain GET goes on to the generated handler.
func (s *Server) graphQLSockets(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if !pipeline.IsUpgrade(r) {
			return next(c)
		}
		w := c.Response().Writer
		// A socket lives longer than any answer: the server's read and write timeouts do not
		// apply to it.
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Time{})
		_ = rc.SetWriteDeadline(time.Time{})
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		authorization, _ := pipeline.AuthorizationHeader(r) // once at most: the gate checked
		r.Header.Set(echo.HeaderAuthorization, authorization)
		s.graphql.ServeWebSocket(ctx, s.sessionsCtx, w, r, func(ctx context.Context, authorization string) (graphqlapi.Session, error) {
			session, p, err := s.socketSession(ctx, authorization)
			if err == nil {
				pipeline.ObserveSocket(c, p)
			}
			return session, err
		})
		return nil
	}
}

// socketSession authenticates a GraphQL socket's key and holds a session under it, which ends
// when the key is revoked or expires (auth.Authenticator.Hold). Every operation the socket
// starts takes one read from the key's budget, as a request would.
func (s *Server) socketSession(ctx context.Context, authorization string) (graphqlapi.Session, auth.Principal, error) {
	p, err := s.auth.Authenticate(ctx, authorization)
	if err != nil {
		return graphqlapi.Session{}, p, err
	}
	held, release, err := s.auth.Hold(auth.WithPrincipal(ctx, p), p)
	switch {
	case errors.Is(err, auth.ErrTooManySessions):
		return graphqlapi.Session{}, p, graphqlapi.SocketRefusal{Code: 4429,
			Reason: "too_many_sessions: at most " + strconv.Itoa(auth.MaxSessionsPerKey) + " streams and sockets per API key and " +
				strconv.Itoa(auth.MaxSessionsPerAccount) + " per account on this server"}
	case errors.Is(err, auth.ErrReplicaFull):
		return graphqlapi.Session{}, p, graphqlapi.SocketRefusal{Code: tryAgainLater,
			Reason: "unavailable: this server holds as many streams and sockets as it may; retry"}
	case err != nil:
		return graphqlapi.Session{}, p, err
	}
	if !pipeline.KeepConnection(ctx) {
		// Closed for a newcomer while it was still anonymous: nobody is left to answer.
		release()
		return graphqlapi.Session{}, p, net.ErrClosed
	}
	return graphqlapi.Session{
		Context: held,
		End:     func() (int, string) { return sessionEnd(context.Cause(held)) },
		Check: func(ctx context.Context) (string, error) {
			err := s.auth.Check(ctx, p)
			if reason, ended := closeReason(err); ended {
				return reason, nil
			} else if err != nil {
				return "", err
			}
			var limited *problem.Error
			if err := s.pipeline.ChargeRead(ctx, p); errors.As(err, &limited) {
				return "", graphqlapi.OperationRefusal{Code: "RATE_LIMITED", Message: limited.Detail}
			}
			return "", nil
		},
		Close: release,
		Operation: func(ctx context.Context) (context.Context, func(), error) {
			held, release, err := s.auth.Hold(ctx, p)
			switch {
			case errors.Is(err, auth.ErrTooManySessions):
				return nil, nil, graphqlapi.OperationRefusal{Code: "TOO_MANY_OPERATIONS", Message: fmt.Sprintf(
					"The key already holds %d streams, sockets and operations on this server (its account %d): complete one first.",
					auth.MaxSessionsPerKey, auth.MaxSessionsPerAccount)}
			case errors.Is(err, auth.ErrReplicaFull):
				return nil, nil, graphqlapi.OperationRefusal{Code: "UNAVAILABLE",
					Message: "This server holds as many streams, sockets and operations as it may. Retry in a few seconds."}
			}
			return held, release, err
		},
		Stopped: func(ctx context.Context) (string, string) {
			if errors.Is(context.Cause(ctx), auth.ErrGaveWay) {
				return "UNAVAILABLE", "This server ended the operation to make room for another account's. Subscribe again."
			}
			return "", ""
		},
	}, p, nil
}

// sessionEnd is the close code and reason of a socket whose session ended: 4403 when its key
// stopped acting, 1013 when it gave way to another account's on a full server; 0 otherwise.
func sessionEnd(cause error) (int, string) {
	if reason, ended := closeReason(cause); ended {
		return 4403, reason
	}
	if errors.Is(cause, auth.ErrGaveWay) {
		return tryAgainLater, "unavailable: this server made room for another account's socket; reconnect"
	}
	return 0, ""
}

// tryAgainLater is WebSocket's close code 1013, Try Again Later.
const tryAgainLater = 1013

// closeReason is the close reason of a socket whose key stopped acting (auth.KeyEnd): its code
// and sentence.
func closeReason(err error) (string, bool) {
	code, detail, ok := auth.KeyEnd(err)
	if !ok {
		return "", false
	}
	return code + ": " + detail, true
}
