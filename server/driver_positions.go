package server

import (
	"context"
	"errors"
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
	var driver store.Driver
	err := s.inRequestTx(ctx, func(tx *store.Store) error {
		d, err := tx.DriverByID(ctx, req.DriverId)
		if err != nil {
			return notFoundAs(err, "driver", req.DriverId)
		}
		tripID, err := tx.ActiveTripOfDriver(ctx, d.ID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if !d.Online && tripID == "" {
			return problem.New(problem.DriverOffline,
				"The driver is offline and drives no trip. Go online first: PUT /v1/drivers/{driverId}/availability.")
		}
		var taken bool
		driver, taken, err = tx.RecordDriverPosition(ctx, d.ID, store.DriverPosition{
			Lat: p.Lat, Lng: p.Lng, Heading: p.Heading, Speed: p.Speed, RecordedAt: p.RecordedAt,
		})
		if err != nil || !taken || tripID == "" {
			return err
		}
		trip, err := tx.TripByID(ctx, tripID)
		if err != nil {
			return err
		}
		return publishTripUpdate(ctx, tx, &trip, now)
	})
	if err != nil {
		return nil, err
	}
	return gen.ReportDriverPositions200JSONResponse{Body: gen.DriverPositionBatchResult{
		Received: int32(len(req.Body.Positions)), Position: positionView(*driver.Position()),
	}}, nil
}
