// Package webhooks signs and verifies Ride API webhook calls: the library a receiver imports.
//
// Verify checks the X-Ride-Signature header of a delivery against one or more endpoint secrets
// (several during a secret rotation), in constant time, and refuses timestamps outside a
// tolerance window in either direction so a captured delivery cannot be replayed later.
// VerifyStandard does the same for the Standard Webhooks headers (webhook-id,
// webhook-timestamp, webhook-signature), which every delivery carries as well. Event is the
// body of a delivery; deduplicate on Event.ID, because delivery is at least once. Headers
// signs one attempt as the service does, for a receiver's own tests; NewSecret makes a secret
// of the service's form.
//
// The package uses the standard library only, so receivers can import it without pulling in
// the service's dependencies. The service's own sending machinery (the durable delivery
// worker, its retry policy and the guarded outbound client) is package webhooks/delivery.
package webhooks
