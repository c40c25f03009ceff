package server

import (
	"context"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/app"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/webhooks"
)

// ListEvents lists the account's events of the retention window, newest first unless sorted
// otherwise: the replay fallback of webhook delivery.
func (s *Server) ListEvents(ctx context.Context, req gen.ListEventsRequestObject) (gen.ListEventsResponseObject, error) {
	if err := app.RequireAdmin(auth.PrincipalFrom(ctx), "list events"); err != nil {
		return nil, err
	}
	p := req.Params
	filter := store.EventFilter{Account: auth.PrincipalFrom(ctx).Account, CreatedAfter: p.CreatedAfter, CreatedBefore: p.CreatedBefore}
	if p.Type != nil {
		filter.Type = string(*p.Type)
	}
	if p.TripId != nil {
		filter.TripID = *p.TripId
	}
	order, err := parseTimeSort(p.Sort)
	if err != nil {
		return nil, err
	}
	query := callerQuery(auth.PrincipalFrom(ctx), "/v1/events", filter.Type, timeKey(p.CreatedAfter), timeKey(p.CreatedBefore), filter.TripID, order.spec)
	params, err := s.pageRequest(p.Limit, p.Cursor, order, query)
	if err != nil {
		return nil, err
	}
	page, err := s.storeFor(ctx).ListEvents(ctx, filter, params)
	if err != nil {
		return nil, err
	}
	data, pagination, err := pageResult(s, page, query, eventView)
	if err != nil {
		return nil, err
	}
	return gen.ListEvents200JSONResponse{Body: gen.EventList{Data: data, Pagination: pagination}}, nil
}

// GetEvent returns one of the account's events exactly as it is delivered; another account's
// is 404.
func (s *Server) GetEvent(ctx context.Context, req gen.GetEventRequestObject) (gen.GetEventResponseObject, error) {
	if err := app.RequireAdmin(auth.PrincipalFrom(ctx), "read events"); err != nil {
		return nil, err
	}
	if !ride.ValidID(ride.PrefixEvent, req.EventId) {
		return nil, app.NotFound("event", req.EventId)
	}
	e, err := s.storeFor(ctx).EventByID(ctx, auth.PrincipalFrom(ctx).Account, req.EventId)
	if err != nil {
		return nil, app.NotFoundAs(err, "event", req.EventId)
	}
	v, err := eventView(e)
	if err != nil {
		return nil, err
	}
	return gen.GetEvent200JSONResponse{Body: v}, nil
}

// eventView is the public form of an outbox row: the very bytes a delivery sends, so that a
// replayed event and a delivered one are the same document.
func eventView(e store.Event) (gen.Event, error) {
	body, err := webhooks.Event{ID: e.ID, Type: e.Type, CreatedAt: e.CreatedAt, Data: []byte(e.Data)}.Body()
	if err != nil {
		return gen.Event{}, err
	}
	var v gen.Event
	err = v.UnmarshalJSON(body)
	return v, err
}
