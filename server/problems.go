package server

// The problem catalogue: every error code of the API, with its HTTP status, its title and what
// it means. newAPIError reads a code's status and title here, /docs/problems lists the table,
// and GraphQL's FORBIDDEN and INTERNAL are its codes in GraphQL's spelling. Adding a code is
// one entry below.

// problemKind is what the catalogue knows of a code.
type problemKind struct {
	Status  int
	Title   string
	Meaning string
}

// catalogue holds every problem kind by code.
var catalogue = map[string]problemKind{}

// problem adds a code to the catalogue and returns it.
func problem(code string, status int, title, meaning string) string {
	if _, taken := catalogue[code]; taken {
		panic("problem code " + code + " is in the catalogue twice")
	}
	catalogue[code] = problemKind{Status: status, Title: title, Meaning: meaning}
	return code
}

// Error codes are part of the public contract: clients branch on them.
var (
	codeIdempotencyKeyRequired = problem("idempotency_key_required", 400, "Idempotency key required", "This operation needs an Idempotency-Key header of 1 to 255 printable characters (a UUID v4 is recommended).")
	codeInvalidCursor          = problem("invalid_cursor", 400, "Invalid cursor", "The cursor is malformed, was tampered with, or belongs to another query (route, filters, sort or caller). Start the walk again without a cursor.")
	codeInvalidIdempotencyKey  = problem("invalid_idempotency_key", 400, "Invalid idempotency key", "The Idempotency-Key header is longer than 255 characters, holds characters other than printable ASCII, or is sent twice.")
	codeInvalidLimit           = problem("invalid_limit", 400, "Invalid limit", "limit is not an integer from 1 to 100.")
	codeInvalidRequest         = problem("invalid_request", 400, "Invalid request", "A parameter, header or body member breaks the API description: wrong type, format, range, length, enum value, a required member missing or an unknown one present. errors[] names each, such as query.status or body.origin.lat.")
	codeMalformedJSON          = problem("malformed_json", 400, "Malformed JSON", "The body is not exactly one valid JSON value in UTF-8: a syntax error, bytes after the value, or a member name given twice in one object (errors[] names it).")
	codeUnauthenticated        = problem("unauthenticated", 401, "Unauthenticated", "No API key, or one that is unknown, expired or revoked. Send Authorization: Bearer <key>.")
	codeForbidden              = problem("forbidden", 403, "Forbidden", "The key is valid but its role or subject may not do this.")
	codeNotFound               = problem("not_found", 404, "Not found", "No such resource or route.")
	codeMethodNotAllowed       = problem("method_not_allowed", 405, "Method not allowed", "The path exists but not with this method; the Allow header lists the methods it has.")
	codeNotAcceptable          = problem("not_acceptable", 406, "Not acceptable", "The Accept header admits no media type the operation answers with.")
	codeEstimateUsed           = problem("estimate_already_used", 409, "Estimate already used", "The fare estimate has already been booked.")
	codeIdempotencyKeyInUse    = problem("idempotency_key_in_use", 409, "Idempotency key in use", "A request with this Idempotency-Key is still running. Retry after Retry-After seconds.")
	codeInvalidTransition      = problem("invalid_transition", 409, "Invalid transition", "The trip's status cannot move that way (the lifecycle allows accepted → arriving | in_progress | cancelled, arriving → in_progress | cancelled, in_progress → completed).")
	codeNoDriverAvailable      = problem("no_driver_available", 409, "No driver available", "No driver of the pickup's city is free right now. Try again shortly.")
	codeRiderHasActiveTrip     = problem("rider_has_active_trip", 409, "Rider has an active trip", "The rider already has a trip that is not completed or cancelled.")
	codeTripAlreadyPaid        = problem("trip_already_paid", 409, "Trip already paid", "The trip already has a successful payment.")
	codeTripNotCompleted       = problem("trip_not_completed", 409, "Trip not completed", "The trip cannot be paid before it is completed.")
	codePreconditionFailed     = problem("precondition_failed", 412, "Precondition failed", "The If-Match ETag no longer matches the resource. Read it again and retry.")
	codeBodyTooLarge           = problem("body_too_large", 413, "Body too large", "The request body is larger than 1 MiB (1,048,576 bytes).")
	codeUnsupportedMediaType   = problem("unsupported_media_type", 415, "Unsupported media type", "The body is not sent as application/json.")
	codeAmountMismatch         = problem("amount_mismatch", 422, "Amount mismatch", "The amount or currency differs from the trip's fare.")
	codeEstimateExpired        = problem("estimate_expired", 422, "Estimate expired", "The fare estimate has expired. Request a new one.")
	codeEstimateNotFound       = problem("estimate_not_found", 422, "Estimate not found", "No fare estimate of yours has that id.")
	codeIdempotencyKeyReused   = problem("idempotency_key_reused", 422, "Idempotency key reused", "This Idempotency-Key was used with another body or on another route.")
	codeInvalidKeyExpiry       = problem("invalid_key_expiry", 422, "Invalid key expiry", "An API key's expires_at must lie in the future.")
	codeInvalidKeySubject      = problem("invalid_key_subject", 422, "Invalid key subject", "A rider or driver key needs a subject that exists (a rider of the account, a driver of the fleet); an admin key has none.")
	codeInvalidWebhookURL      = problem("invalid_webhook_url", 422, "Invalid webhook URL", "The webhook URL is not https, or names a private, loopback or link-local address, which the service never calls.")
	codeOutsideServiceArea     = problem("outside_service_area", 422, "Outside the service area", "The origin or destination lies outside every served city.")
	codePaymentDeclined        = problem("payment_declined", 422, "Payment declined", "The payment provider declined the payment method. The failed payment is recorded.")
	codeRiderIDRequired        = problem("rider_id_required", 422, "Rider id required", "An admin booking a ride must name the rider in rider_id.")
	codeRiderNotFound          = problem("rider_not_found", 422, "Rider not found", "No rider has the rider_id given in the body.")
	codeTripNotFound           = problem("trip_not_found", 422, "Trip not found", "The trip named in the body does not exist or is not yours.")
	codeRateLimited            = problem("rate_limited", 429, "Rate limited", "The API key's budget for this kind of request (reads or writes) is spent, or this address sent too many unknown keys. Wait Retry-After seconds; RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset describe the key's bucket.")
	codeInternal               = problem("internal", 500, "Internal error", "A fault on our side; the answer carries no details. Retry with backoff and quote the request_id if it persists.")
	codePaymentProviderError   = problem("payment_provider_error", 502, "Payment provider error", "The payment provider failed or could not be reached. Nothing was committed; retry with the same Idempotency-Key, with backoff.")
	codeUnavailable            = problem("unavailable", 503, "Service unavailable", "The service is not ready (starting, or its database is unreachable). Retry with backoff.")
)
