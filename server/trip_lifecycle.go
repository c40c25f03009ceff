package server

import (
	"context"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/app"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/pipeline"
	"github.com/rideapi/ride/server/problem"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// UpdateTrip moves a trip to the status the body names (app.MoveTrip), for its driver or an
// admin. The same status again is a no-op; an If-Match that no longer holds is 412.
func (s *Server) UpdateTrip(ctx context.Context, req gen.UpdateTripRequestObject) (gen.UpdateTripResponseObject, error) {
	caller := auth.PrincipalFrom(ctx)
	trip, err := s.app.MoveTrip(ctx, caller, app.MoveTripParams{
		TripID: req.TripId, To: ride.TripStatus(req.Body.Status), Precondition: ifMatch(req.Params.IfMatch, caller),
	})
	if err != nil {
		return nil, err
	}
	view := tripView(trip, nil, caller)
	etag, err := representationETag(view)
	if err != nil {
		return nil, err
	}
	return gen.UpdateTrip200JSONResponse{Body: view, Headers: gen.UpdateTrip200ResponseHeaders{ETag: etag}}, nil
}

// CreateTripCancellation cancels a trip that has not started (app.CancelTrip) and answers the
// cancellation, who did it and why.
func (s *Server) CreateTripCancellation(ctx context.Context, req gen.CreateTripCancellationRequestObject) (gen.CreateTripCancellationResponseObject, error) {
	cancellation, err := s.app.CancelTrip(ctx, auth.PrincipalFrom(ctx), req.TripId, req.Body.Reason)
	if err != nil {
		return nil, err
	}
	return gen.CreateTripCancellation201JSONResponse{
		Body: gen.Cancellation{
			Id: cancellation.ID, TripId: cancellation.TripID, Reason: cancellation.Reason,
			CancelledBy: gen.CancelledBy(cancellation.CancelledBy), CreatedAt: cancellation.CreatedAt.UTC(),
		},
		Headers: gen.CreateTripCancellation201ResponseHeaders{Location: "/v1/trips/" + cancellation.TripID},
	}, nil
}

// ifMatch is the If-Match precondition: the trip's full representation must still have the
// given ETag, the one GET /v1/trips/{tripId} answers caller.
func ifMatch(header *string, caller auth.Principal) func(store.Trip) error {
	if header == nil {
		return nil
	}
	return func(t store.Trip) error {
		etag, err := representationETag(tripView(t, nil, caller))
		if err != nil {
			return err
		}
		if !pipeline.ETagMatchesStrong(*header, etag) {
			return problem.New(problem.PreconditionFailed,
				"The trip changed since the ETag in If-Match was read. Read it again and decide anew.")
		}
		return nil
	}
}
