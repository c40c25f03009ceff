// Package ride holds the domain rules of the Ride API as plain Go: the trip
// state machine, fare quotes, identifiers, list sorting and the opaque cursor
// codec.
//
// It imports only the standard library so that the rules can be tested in
// isolation and reused by every transport (REST, GraphQL, webhooks) without
// dragging in a web framework or a database driver.
package ride
