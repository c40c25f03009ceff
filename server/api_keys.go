package server

import (
	"context"

	"github.com/rideapi/ride/server/app"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/problem"
	"github.com/rideapi/ride/server/ride"
	"github.com/rideapi/ride/store"
)

// apiKeysRoute is the collection of the account's API keys.
const apiKeysRoute = "/v1/api-keys"

// CreateApiKey creates a key in the caller's account and shows its secret once.
func (s *Server) CreateApiKey(ctx context.Context, req gen.CreateApiKeyRequestObject) (gen.CreateApiKeyResponseObject, error) {
	if req.Body == nil {
		return nil, problem.New(problem.InvalidRequest, "Send the key as a JSON body.")
	}
	body := req.Body
	secret, key, err := s.app.CreateAPIKey(ctx, auth.PrincipalFrom(ctx), app.APIKeyParams{
		Role: string(body.Role), Subject: deref(body.Subject), Description: body.Description, ExpiresAt: body.ExpiresAt,
	})
	if err != nil {
		return nil, err
	}
	v := apiKeyView(key)
	return gen.CreateApiKey201JSONResponse{
		Body: gen.ApiKeyCreated{
			Id: v.Id, Role: v.Role, Subject: v.Subject, Account: v.Account, Prefix: v.Prefix,
			Description: v.Description, CreatedAt: v.CreatedAt, ExpiresAt: v.ExpiresAt,
			LastUsedAt: v.LastUsedAt, RevokedAt: v.RevokedAt, Secret: secret,
		},
		Headers: gen.CreateApiKey201ResponseHeaders{Location: apiKeysRoute + "/" + key.ID},
	}, nil
}

// ListApiKeys lists the account's keys, newest first unless sorted otherwise, revoked ones
// included.
func (s *Server) ListApiKeys(ctx context.Context, req gen.ListApiKeysRequestObject) (gen.ListApiKeysResponseObject, error) {
	if err := app.RequireAdmin(auth.PrincipalFrom(ctx), "list API keys"); err != nil {
		return nil, err
	}
	caller := auth.PrincipalFrom(ctx)
	order, err := parseTimeSort(req.Params.Sort)
	if err != nil {
		return nil, err
	}
	query := callerQuery(caller, apiKeysRoute, order.spec)
	params, err := s.pageRequest(req.Params.Limit, req.Params.Cursor, order, query)
	if err != nil {
		return nil, err
	}
	page, err := s.storeFor(ctx).ListAPIKeys(ctx, caller.Account, params)
	if err != nil {
		return nil, err
	}
	data, pagination, err := pageResult(s, page, query, func(k store.APIKey) (gen.ApiKey, error) {
		return apiKeyView(k), nil
	})
	if err != nil {
		return nil, err
	}
	return gen.ListApiKeys200JSONResponse{Body: gen.ApiKeyList{Data: data, Pagination: pagination}}, nil
}

// GetApiKey returns one of the account's keys, without its secret.
func (s *Server) GetApiKey(ctx context.Context, req gen.GetApiKeyRequestObject) (gen.GetApiKeyResponseObject, error) {
	if err := app.RequireAdmin(auth.PrincipalFrom(ctx), "read API keys"); err != nil {
		return nil, err
	}
	if !ride.ValidID(ride.PrefixAPIKey, req.KeyId) {
		return nil, app.NotFound("API key", req.KeyId)
	}
	key, err := s.storeFor(ctx).APIKeyByID(ctx, auth.PrincipalFrom(ctx).Account, req.KeyId)
	if err != nil {
		return nil, app.NotFoundAs(err, "API key", req.KeyId)
	}
	return gen.GetApiKey200JSONResponse{Body: apiKeyView(key)}, nil
}

// RevokeApiKey revokes one of the account's keys. This replica forgets it at once; the others
// when they next poll the revocation revision (auth.Authenticator.Watch).
func (s *Server) RevokeApiKey(ctx context.Context, req gen.RevokeApiKeyRequestObject) (gen.RevokeApiKeyResponseObject, error) {
	if _, err := s.app.RevokeAPIKey(ctx, auth.PrincipalFrom(ctx), req.KeyId); err != nil {
		return nil, err
	}
	s.auth.Forget(req.KeyId)
	return gen.RevokeApiKey204Response{}, nil
}

// apiKeyView is the public projection of a key; the hash has no member.
func apiKeyView(k store.APIKey) gen.ApiKey {
	return gen.ApiKey{
		Id: k.ID, Role: gen.ApiKeyRole(k.Role), Subject: k.Subject, Account: k.Account, Prefix: k.Prefix,
		Description: k.Description, CreatedAt: k.CreatedAt.UTC(), ExpiresAt: utcPtr(k.ExpiresAt),
		LastUsedAt: utcPtr(k.LastUsedAt), RevokedAt: utcPtr(k.RevokedAt),
	}
}
