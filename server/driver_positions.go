package server

import (
	"context"
	"fmt"
	"time"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/app"
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
		return nil, app.Forbidden("Only the driver themself reports their positions.")
	}
	now := s.now()
	latest := -1
	for i, p := range req.Body.Positions {
		if p.RecordedAt.After(now.Add(positionClockSkew)) {
			location := fmt.Sprintf("body.positions.%d.recorded_at", i)
			return nil, &problem.Error{Code: problem.PositionInFuture,
				Detail: "recorded_at " + p.RecordedAt.UTC().Format(time.RFC3339) + " is more than 30 seconds ahead of the server's clock (" + now.Format(time.RFC3339) + ").",
				Fields: []problem.FieldError{{Location: location, Message: "more than 30 seconds in the future"}}}
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
		return nil, app.NotFoundAs(err, "driver", req.DriverId)
	case !report.Online && report.ActiveTripID == "":
		return nil, problem.New(problem.DriverOffline,
			"The driver is offline and drives no trip. Go online first: PUT /v1/drivers/{driverId}/availability.")
	}
	// The report is the driver's position (taken now, or by an earlier try of the same report
	// whose answer was lost): the trip's followers get it. A report whose update could not be
	// published fails (503 when the database is away), and its retry publishes it: a report
	// answered 200 is one its followers got.
	reported := p.RecordedAt.UTC().Truncate(time.Microsecond)
	if report.ActiveTripID != "" && (report.Taken || report.Position.RecordedAt.Equal(reported)) {
		trip, err := st.TripWithin(ctx, report.ActiveTripID, store.TripReach{DriverID: req.DriverId})
		if err != nil {
			return nil, err
		}
		if err := publishTripUpdate(ctx, st, &trip, now); err != nil {
			return nil, err
		}
	}
	return gen.ReportDriverPositions200JSONResponse{Body: gen.DriverPositionBatchResult{
		Received: int32(len(req.Body.Positions)), Position: positionView(report.Position),
	}}, nil
}
