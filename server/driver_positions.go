package server

import (
	"context"
	"fmt"
	"time"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/problem"
	"github.com/rideapi/ride/store"
)

// positionClockSkew is how far ahead of the server's clock a device's recorded_at may be: a
// phone's clock is seldom exact, but a position from further in the future would hide every
// honest report after it.
const positionClockSkew = 30 * time.Second

// ReportDriverPositions takes a driver's positions. Only the latest counts; when it is newer
// than the stored one it becomes the driver's position and, while they drive a trip, reaches
// the trip's live updates.
func (s *Server) ReportDriverPositions(ctx context.Context, req gen.ReportDriverPositionsRequestObject) (gen.ReportDriverPositionsResponseObject, error) {
	if !auth.PrincipalFrom(ctx).Is(auth.RoleDriver, req.DriverId) {
		return nil, forbidden("Only the driver themself reports their positions.")
	}
	now := s.now()
	latest := -1
	for i, p := range req.Body.Positions {
		if p.RecordedAt.After(now.Add(positionClockSkew)) {
			location := fmt.Sprintf("body.positions[%d].recorded_at", i)
			return nil, &problem.Error{Code: problem.PositionInFuture,
				Detail: "recorded_at " + p.RecordedAt.UTC().Format(time.RFC3339) + " is more than 30 seconds ahead of the server's clock (" + now.Format(time.RFC3339) + ").",
				Fields: []gen.ProblemFieldError{{Location: location, Message: "more than 30 seconds in the future"}}}
		}
		if latest < 0 || p.RecordedAt.After(req.Body.Positions[latest].RecordedAt) {
			latest = i
		}
	}
	p := req.Body.Positions[latest]
	st := s.storeFor(ctx)
	report, err := st.RecordDriverPosition(ctx, req.DriverId, store.DriverPosition{
		Lat: p.Lat, Lng: p.Lng, Heading: p.Heading, Speed: p.Speed, RecordedAt: p.RecordedAt,
	})
	switch {
	case err != nil:
		return nil, notFoundAs(err, "driver", req.DriverId)
	case !report.Online && report.ActiveTripID == "":
		return nil, problem.New(problem.DriverOffline,
			"The driver is offline and drives no trip. Go online first: PUT /v1/drivers/{driverId}/availability.")
	}
	if report.Taken && report.ActiveTripID != "" {
		// The trip's followers get the position; a report that stored it but failed to tell
		// them is still a success for the driver, whose next report tells them.
		if trip, err := st.TripWithin(ctx, report.ActiveTripID, store.TripReach{DriverID: req.DriverId}); err == nil {
			if err := publishTripUpdate(ctx, st, &trip, now); err != nil {
				s.log.WarnContext(ctx, "publish trip update", "trip_id", trip.ID, "error", err.Error())
			}
		}
	}
	return gen.ReportDriverPositions200JSONResponse{Body: gen.DriverPositionBatchResult{
		Received: int32(len(req.Body.Positions)), Position: positionView(report.Position),
	}}, nil
}
