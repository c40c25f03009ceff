// Package webhooks signs, verifies and delivers Ride API webhook calls.
//
// Consumers use the verification half: Verify checks the X-Ride-Signature header of a
// delivery against one or more endpoint secrets (several during a secret rotation), in
// constant time, and refuses timestamps outside a tolerance window in either direction so a
// captured delivery cannot be replayed later. VerifyStandard does the same for the Standard
// Webhooks headers (webhook-id, webhook-timestamp, webhook-signature), which every delivery
// carries as well. Event is the body of a delivery; deduplicate on Event.ID, because delivery
// is at least once.
//
// The service uses the sending half: NewSecret makes endpoint secrets, Headers signs one
// attempt, NewClient is the outbound HTTP client that refuses private addresses, and Worker is
// the durable delivery loop over a Store.
//
// The package uses the standard library only, so consumers can import it without pulling in
// the server's dependencies.
package webhooks
