// Package schema holds the GraphQL schema of Ride API, written first and served as written:
// ride.graphql is the contract of the query interface, as openapi/ride.yaml is of the REST one.
package schema

import _ "embed"

// SDL is ride.graphql, the schema definition the server parses at start.
//
//go:embed ride.graphql
var SDL string
