// Package openapi embeds ride.yaml, the single source of the REST contract, so the binary
// publishes the document exactly as it is maintained.
package openapi

import _ "embed"

// YAML is openapi/ride.yaml as written.
//
//go:embed ride.yaml
var YAML []byte
