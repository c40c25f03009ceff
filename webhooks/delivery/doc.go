// Package delivery is how the service sends webhooks: Worker is the durable delivery loop over
// a Store (at least once, one attempt per claim across replicas, retries by RetryPolicy until
// the horizon), NewClient the outbound HTTP client that refuses private addresses and follows
// no redirects, and Post one signed attempt. Receivers need none of it: they import the parent
// package, webhooks, which verifies what this package signs.
package delivery
