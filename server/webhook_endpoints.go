package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/app"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/pipeline"
	"github.com/rideapi/ride/server/problem"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/webhooks"
	"github.com/rideapi/ride/webhooks/delivery"
)

// prefixWebhookAttempt marks the attempts of the deliveries log ("webhook attempt").
const prefixWebhookAttempt = "wha"

// defaultGracePeriod is how long a rotated-out secret keeps signing unless the rotation says.
const defaultGracePeriod = 24 * time.Hour

// webhookEndpointsRoute is the canonical collection path; the deprecated alias
// /v1/webhook_endpoints shares its operations and its cursors.
const webhookEndpointsRoute = "/v1/webhook-endpoints"

// CreateWebhookEndpoint registers an endpoint for the caller's account and shows its secret once.
func (s *Server) CreateWebhookEndpoint(ctx context.Context, req gen.CreateWebhookEndpointRequestObject) (gen.CreateWebhookEndpointResponseObject, error) {
	created, err := s.createWebhookEndpoint(ctx, req.Body)
	if err != nil {
		return nil, err
	}
	return gen.CreateWebhookEndpoint201JSONResponse{
		Body:    created,
		Headers: gen.CreateWebhookEndpoint201ResponseHeaders{Location: webhookEndpointsRoute + "/" + created.Id},
	}, nil
}

func (s *Server) createWebhookEndpoint(ctx context.Context, body *gen.WebhookEndpointCreate) (gen.WebhookEndpointWithSecret, error) {
	if err := app.RequireAdmin(auth.PrincipalFrom(ctx), "register webhook endpoints"); err != nil {
		return gen.WebhookEndpointWithSecret{}, err
	}
	if body == nil {
		return gen.WebhookEndpointWithSecret{}, problem.New(problem.InvalidRequest, "Send the endpoint as a JSON body.")
	}
	if _, err := delivery.CheckURL(body.Url, s.cfg.WebhookInsecure); err != nil {
		return gen.WebhookEndpointWithSecret{}, err
	}
	types, err := eventKinds(body.Events)
	if err != nil {
		return gen.WebhookEndpointWithSecret{}, err
	}
	now := s.now()
	endpoint, err := s.storeFor(ctx).CreateWebhookEndpoint(ctx, store.WebhookEndpoint{
		ID:          ride.NewID(ride.PrefixWebhookEndpoint),
		Account:     auth.PrincipalFrom(ctx).Account,
		URL:         body.Url,
		Description: body.Description,
		EventTypes:  types,
		Status:      store.WebhookEnabled,
		Secret:      webhooks.NewSecret(),
		CreatedAt:   now,
		UpdatedAt:   now,
	})
	if err != nil {
		return gen.WebhookEndpointWithSecret{}, err
	}
	v := webhookEndpointView(endpoint)
	return gen.WebhookEndpointWithSecret{
		Id: v.Id, Url: v.Url, Events: v.Events, Description: v.Description, Status: v.Status,
		CreatedAt: v.CreatedAt, Secret: endpoint.Secret,
	}, nil
}

// ListWebhookEndpoints lists the caller's account's endpoints, newest first unless sorted
// otherwise.
func (s *Server) ListWebhookEndpoints(ctx context.Context, req gen.ListWebhookEndpointsRequestObject) (gen.ListWebhookEndpointsResponseObject, error) {
	list, err := s.listWebhookEndpoints(ctx, req.Params.Limit, req.Params.Cursor, req.Params.Sort)
	if err != nil {
		return nil, err
	}
	return gen.ListWebhookEndpoints200JSONResponse{Body: list}, nil
}

func (s *Server) listWebhookEndpoints(ctx context.Context, limit *int32, cursor *string, sort *gen.CreatedAtSort) (gen.WebhookEndpointList, error) {
	if err := app.RequireAdmin(auth.PrincipalFrom(ctx), "list webhook endpoints"); err != nil {
		return gen.WebhookEndpointList{}, err
	}
	order, err := parseTimeSort(sort)
	if err != nil {
		return gen.WebhookEndpointList{}, err
	}
	caller := auth.PrincipalFrom(ctx)
	query := callerQuery(caller, webhookEndpointsRoute, order.spec)
	params, err := s.pageRequest(limit, cursor, order, query)
	if err != nil {
		return gen.WebhookEndpointList{}, err
	}
	page, err := s.storeFor(ctx).ListWebhookEndpoints(ctx, caller.Account, params)
	if err != nil {
		return gen.WebhookEndpointList{}, err
	}
	data, pagination, err := pageResult(s, page, query, func(w store.WebhookEndpoint) (gen.WebhookEndpoint, error) {
		return webhookEndpointView(w), nil
	})
	return gen.WebhookEndpointList{Data: data, Pagination: pagination}, err
}

// eventKinds are the event kinds of a request, each at most once.
func eventKinds(events []gen.EventType) ([]string, error) {
	types := make([]string, len(events))
	for i, t := range events {
		if slices.Contains(events[:i], t) {
			// The document leaves uniqueItems out (generators turn it into sets that do not
			// compile) and says "each at most once" in words; the check is here.
			return nil, &problem.Error{Code: problem.InvalidRequest,
				Detail: "Name each event kind at most once; see errors[].",
				Fields: []problem.FieldError{{Location: "body.events", Message: fmt.Sprintf("item %d: %s is listed twice", i, t)}}}
		}
		types[i] = string(t)
	}
	return types, nil
}

// UpdateWebhookEndpoint changes the members sent of one of the account's endpoints; its
// secret stays, and the change applies to the next attempt.
func (s *Server) UpdateWebhookEndpoint(ctx context.Context, req gen.UpdateWebhookEndpointRequestObject) (gen.UpdateWebhookEndpointResponseObject, error) {
	if err := app.RequireAdmin(auth.PrincipalFrom(ctx), "change webhook endpoints"); err != nil {
		return nil, err
	}
	if _, err := s.webhookEndpoint(ctx, req.EndpointId); err != nil {
		return nil, err
	}
	b := req.Body
	change := store.WebhookEndpointChange{URL: b.Url, Description: b.Description, Now: s.now()}
	if b.Url != nil {
		if _, err := delivery.CheckURL(*b.Url, s.cfg.WebhookInsecure); err != nil {
			return nil, err
		}
	}
	if b.Events != nil {
		types, err := eventKinds(*b.Events)
		if err != nil {
			return nil, err
		}
		change.EventTypes = types
	}
	if b.Status != nil {
		status := string(*b.Status)
		change.Status = &status
	}
	w, err := s.storeFor(ctx).UpdateWebhookEndpoint(ctx, auth.PrincipalFrom(ctx).Account, req.EndpointId, change)
	if err != nil {
		return nil, app.NotFoundAs(err, "webhook endpoint", req.EndpointId)
	}
	return gen.UpdateWebhookEndpoint200JSONResponse{Body: webhookEndpointView(w)}, nil
}

// TestWebhookEndpoint sends the endpoint a signed ping now and answers what happened; the ping
// is neither retried nor logged.
func (s *Server) TestWebhookEndpoint(ctx context.Context, req gen.TestWebhookEndpointRequestObject) (gen.TestWebhookEndpointResponseObject, error) {
	if err := app.RequireAdmin(auth.PrincipalFrom(ctx), "test webhook endpoints"); err != nil {
		return nil, err
	}
	w, err := s.webhookEndpoint(ctx, req.EndpointId)
	if err != nil {
		return nil, err
	}
	now := s.now()
	data, err := json.Marshal(map[string]string{"endpoint_id": w.ID})
	if err != nil {
		return nil, err
	}
	event := webhooks.Event{ID: ride.NewID(ride.PrefixEvent), Type: "ping", CreatedAt: now, Data: data}
	var previous string
	var previousExpiresAt time.Time
	if w.PreviousSecret != nil && w.PreviousSecretExpiresAt != nil {
		previous, previousExpiresAt = *w.PreviousSecret, *w.PreviousSecretExpiresAt
	}
	secrets := delivery.SigningSecrets(w.Secret, previous, previousExpiresAt, now)
	res, latency, err := delivery.Post(ctx, s.webhookClient, w.URL, event, 1, secrets, now)
	result := gen.WebhookTestResult{EventId: event.ID, LatencyMs: latency.Milliseconds()}
	switch {
	case err != nil:
		reason := delivery.DescribeSendError(err, s.webhookClient.Timeout)
		result.Error = &reason
	default:
		status := int32(res.StatusCode)
		result.ResponseStatus = &status
		result.Delivered = res.StatusCode >= 200 && res.StatusCode < 300
		if !result.Delivered {
			reason := fmt.Sprintf("the receiver answered %d %s", res.StatusCode, http.StatusText(res.StatusCode))
			result.Error = &reason
		}
	}
	return gen.TestWebhookEndpoint200JSONResponse{Body: result}, nil
}

// CreateWebhookRedelivery sends one of the account's events to the endpoint again.
func (s *Server) CreateWebhookRedelivery(ctx context.Context, req gen.CreateWebhookRedeliveryRequestObject) (gen.CreateWebhookRedeliveryResponseObject, error) {
	if err := app.RequireAdmin(auth.PrincipalFrom(ctx), "redeliver events"); err != nil {
		return nil, err
	}
	if _, err := s.webhookEndpoint(ctx, req.EndpointId); err != nil {
		return nil, err
	}
	eventID := req.Body.EventId
	noEvent := &problem.Error{Code: problem.EventNotFound,
		Detail: "No event of this account has the id " + problem.TruncateID(eventID) + " (events are kept 30 days).",
		Fields: []problem.FieldError{{Location: "body.event_id", Message: "no such event of yours"}}}
	if !ride.ValidID(ride.PrefixEvent, eventID) {
		return nil, noEvent
	}
	now := s.now()
	err := s.storeFor(ctx).Redeliver(ctx, auth.PrincipalFrom(ctx).Account, req.EndpointId, eventID, now)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, noEvent // the endpoint was read above: the event is missing
	case errors.Is(err, store.ErrConflict):
		return nil, problem.New(problem.WebhookEndpointDisabled,
			"The endpoint is disabled. Enable it with PATCH /v1/webhook-endpoints/{endpointId} first.")
	case err != nil:
		return nil, err
	}
	return gen.CreateWebhookRedelivery202JSONResponse{Body: gen.WebhookRedelivery{
		EventId: eventID, EndpointId: req.EndpointId, Status: gen.WebhookRedeliveryStatusPending, DueAt: now,
	}}, nil
}

// GetWebhookEndpoint returns one of the account's endpoints, without its secret.
func (s *Server) GetWebhookEndpoint(ctx context.Context, req gen.GetWebhookEndpointRequestObject) (gen.GetWebhookEndpointResponseObject, error) {
	if err := app.RequireAdmin(auth.PrincipalFrom(ctx), "read webhook endpoints"); err != nil {
		return nil, err
	}
	w, err := s.webhookEndpoint(ctx, req.EndpointId)
	if err != nil {
		return nil, err
	}
	return gen.GetWebhookEndpoint200JSONResponse{Body: webhookEndpointView(w)}, nil
}

// DeleteWebhookEndpoint removes an endpoint with its pending deliveries and log. Deleting
// again finds nothing: 404, the state unchanged.
func (s *Server) DeleteWebhookEndpoint(ctx context.Context, req gen.DeleteWebhookEndpointRequestObject) (gen.DeleteWebhookEndpointResponseObject, error) {
	if err := s.deleteWebhookEndpoint(ctx, req.EndpointId); err != nil {
		return nil, err
	}
	return gen.DeleteWebhookEndpoint204Response{}, nil
}

func (s *Server) deleteWebhookEndpoint(ctx context.Context, id string) error {
	if err := app.RequireAdmin(auth.PrincipalFrom(ctx), "delete webhook endpoints"); err != nil {
		return err
	}
	if !ride.ValidID(ride.PrefixWebhookEndpoint, id) {
		return app.NotFound("webhook endpoint", id)
	}
	err := s.storeFor(ctx).DeleteWebhookEndpoint(ctx, auth.PrincipalFrom(ctx).Account, id)
	return app.NotFoundAs(err, "webhook endpoint", id)
}

// RotateWebhookEndpointSecret gives the endpoint a new secret; the old one keeps signing for
// the grace period.
func (s *Server) RotateWebhookEndpointSecret(ctx context.Context, req gen.RotateWebhookEndpointSecretRequestObject) (gen.RotateWebhookEndpointSecretResponseObject, error) {
	if err := app.RequireAdmin(auth.PrincipalFrom(ctx), "rotate webhook secrets"); err != nil {
		return nil, err
	}
	if !ride.ValidID(ride.PrefixWebhookEndpoint, req.EndpointId) {
		return nil, app.NotFound("webhook endpoint", req.EndpointId)
	}
	grace := defaultGracePeriod
	if req.Body != nil && req.Body.GracePeriodSeconds != nil {
		grace = time.Duration(*req.Body.GracePeriodSeconds) * time.Second
	}
	now := s.now()
	secret := webhooks.NewSecret()
	_, err := s.storeFor(ctx).RotateWebhookSecret(ctx, store.RotateWebhookSecretParams{
		Account: auth.PrincipalFrom(ctx).Account, ID: req.EndpointId, NewSecret: secret,
		PreviousExpiresAt: now.Add(grace), Now: now,
	})
	if err != nil {
		return nil, app.NotFoundAs(err, "webhook endpoint", req.EndpointId)
	}
	return gen.RotateWebhookEndpointSecret201JSONResponse{
		Body:    gen.SecretRotation{Secret: secret, PreviousSecretExpiresAt: now.Add(grace)},
		Headers: gen.RotateWebhookEndpointSecret201ResponseHeaders{Location: webhookEndpointsRoute + "/" + req.EndpointId},
	}, nil
}

// ListWebhookDeliveries lists an endpoint's attempt log, newest first unless sorted otherwise.
func (s *Server) ListWebhookDeliveries(ctx context.Context, req gen.ListWebhookDeliveriesRequestObject) (gen.ListWebhookDeliveriesResponseObject, error) {
	if err := app.RequireAdmin(auth.PrincipalFrom(ctx), "read deliveries"); err != nil {
		return nil, err
	}
	w, err := s.webhookEndpoint(ctx, req.EndpointId)
	if err != nil {
		return nil, err
	}
	order, err := parseTimeSort(req.Params.Sort)
	if err != nil {
		return nil, err
	}
	query := callerQuery(auth.PrincipalFrom(ctx), webhookEndpointsRoute+"/"+w.ID+"/deliveries", order.spec)
	params, err := s.pageRequest(req.Params.Limit, req.Params.Cursor, order, query)
	if err != nil {
		return nil, err
	}
	page, err := s.storeFor(ctx).ListWebhookAttempts(ctx, w.ID, params)
	if err != nil {
		return nil, err
	}
	data, pagination, err := pageResult(s, page, query, func(a store.WebhookAttempt) (gen.WebhookDelivery, error) {
		return webhookDeliveryView(a), nil
	})
	if err != nil {
		return nil, err
	}
	return gen.ListWebhookDeliveries200JSONResponse{Body: gen.WebhookDeliveryList{Data: data, Pagination: pagination}}, nil
}

// webhookEndpoint loads one of the caller's account's endpoints: 404 when absent or another
// account's, so an id tells nothing across accounts.
func (s *Server) webhookEndpoint(ctx context.Context, id string) (store.WebhookEndpoint, error) {
	if !ride.ValidID(ride.PrefixWebhookEndpoint, id) {
		return store.WebhookEndpoint{}, app.NotFound("webhook endpoint", id)
	}
	w, err := s.storeFor(ctx).WebhookEndpointByID(ctx, auth.PrincipalFrom(ctx).Account, id)
	if err != nil {
		return store.WebhookEndpoint{}, app.NotFoundAs(err, "webhook endpoint", id)
	}
	return w, nil
}

// webhookEndpointView is the public projection of an endpoint; the secrets have no member.
func webhookEndpointView(w store.WebhookEndpoint) gen.WebhookEndpoint {
	events := make([]gen.EventType, len(w.EventTypes))
	for i, t := range w.EventTypes {
		events[i] = gen.EventType(t)
	}
	return gen.WebhookEndpoint{
		Id: w.ID, Url: w.URL, Events: events, Description: w.Description,
		Status: gen.WebhookEndpointStatus(w.Status), CreatedAt: w.CreatedAt.UTC(),
	}
}

func webhookDeliveryView(a store.WebhookAttempt) gen.WebhookDelivery {
	v := gen.WebhookDelivery{
		Id: a.ID, EventId: a.EventID, EventType: gen.EventType(a.EventType), Attempt: int32(a.Attempt),
		Status: gen.WebhookDeliveryStatus(a.Status), Error: a.Error, AttemptedAt: a.AttemptedAt.UTC(),
	}
	if a.ResponseStatus != nil {
		v.ResponseStatus = ptr(int32(*a.ResponseStatus))
	}
	if a.LatencyMs != nil {
		v.LatencyMs = *a.LatencyMs
	}
	if a.NextAttemptAt != nil {
		v.NextAttemptAt = utc(*a.NextAttemptAt)
	}
	return v
}

// The deprecated spelling /v1/webhook_endpoints runs the same operations. Every answer on it,
// errors and 413 included, carries Deprecation and Link (webhookEndpointsAliasPath).

// deprecatedSince is the Deprecation header of the alias (RFC 9745): the date it was
// deprecated, 2026-11-21T00:00:00Z, as an RFC 9651 Date (`@` and Unix seconds). No Sunset
// header goes with it: the alias works for the whole of v1.
const deprecatedSince = "@1795219200"

// webhookEndpointsAlias is the deprecated spelling of webhookEndpointsRoute.
const webhookEndpointsAlias = "/v1/webhook_endpoints"

// webhookEndpointsAliasPath is how the pipeline marks every answer on the alias, errors and
// 413 included (pipeline.Config.Deprecated).
var webhookEndpointsAliasPath = pipeline.DeprecatedPath{
	Prefix: webhookEndpointsAlias, Successor: webhookEndpointsRoute, Deprecation: deprecatedSince,
}

// successorLink is the Link header of a deprecated alias path, given escaped.
func successorLink(escapedPath string) string {
	return webhookEndpointsAliasPath.SuccessorLink(escapedPath)
}

// CreateWebhookEndpointDeprecated is CreateWebhookEndpoint under the seed's spelling.
func (s *Server) CreateWebhookEndpointDeprecated(ctx context.Context, req gen.CreateWebhookEndpointDeprecatedRequestObject) (gen.CreateWebhookEndpointDeprecatedResponseObject, error) {
	created, err := s.createWebhookEndpoint(ctx, req.Body)
	if err != nil {
		return nil, err
	}
	return gen.CreateWebhookEndpointDeprecated201JSONResponse{
		Body: created,
		Headers: gen.CreateWebhookEndpointDeprecated201ResponseHeaders{
			Deprecation: deprecatedSince, Link: successorLink(webhookEndpointsAlias),
			Location: webhookEndpointsRoute + "/" + created.Id,
		},
	}, nil
}

// ListWebhookEndpointsDeprecated is ListWebhookEndpoints under the seed's spelling.
func (s *Server) ListWebhookEndpointsDeprecated(ctx context.Context, req gen.ListWebhookEndpointsDeprecatedRequestObject) (gen.ListWebhookEndpointsDeprecatedResponseObject, error) {
	list, err := s.listWebhookEndpoints(ctx, req.Params.Limit, req.Params.Cursor, req.Params.Sort)
	if err != nil {
		return nil, err
	}
	return gen.ListWebhookEndpointsDeprecated200JSONResponse{
		Body: list,
		Headers: gen.ListWebhookEndpointsDeprecated200ResponseHeaders{
			Deprecation: deprecatedSince, Link: successorLink(webhookEndpointsAlias),
		},
	}, nil
}

// GetWebhookEndpointDeprecated is GetWebhookEndpoint under the seed's spelling.
func (s *Server) GetWebhookEndpointDeprecated(ctx context.Context, req gen.GetWebhookEndpointDeprecatedRequestObject) (gen.GetWebhookEndpointDeprecatedResponseObject, error) {
	if err := app.RequireAdmin(auth.PrincipalFrom(ctx), "read webhook endpoints"); err != nil {
		return nil, err
	}
	w, err := s.webhookEndpoint(ctx, req.EndpointId)
	if err != nil {
		return nil, err
	}
	return gen.GetWebhookEndpointDeprecated200JSONResponse{
		Body: webhookEndpointView(w),
		Headers: gen.GetWebhookEndpointDeprecated200ResponseHeaders{
			Deprecation: deprecatedSince, Link: successorLink(webhookEndpointsAlias + "/" + url.PathEscape(req.EndpointId)),
		},
	}, nil
}

// DeleteWebhookEndpointDeprecated is DeleteWebhookEndpoint under the seed's spelling.
func (s *Server) DeleteWebhookEndpointDeprecated(ctx context.Context, req gen.DeleteWebhookEndpointDeprecatedRequestObject) (gen.DeleteWebhookEndpointDeprecatedResponseObject, error) {
	if err := s.deleteWebhookEndpoint(ctx, req.EndpointId); err != nil {
		return nil, err
	}
	return gen.DeleteWebhookEndpointDeprecated204Response{
		Headers: gen.DeleteWebhookEndpointDeprecated204ResponseHeaders{
			Deprecation: deprecatedSince, Link: successorLink(webhookEndpointsAlias + "/" + url.PathEscape(req.EndpointId)),
		},
	}, nil
}
