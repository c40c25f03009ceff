// Package gen holds the code generated from openapi/ride.yaml: the models, the Echo
// strict-server interface, the embedded document and a typed Go client. Nothing here is
// written by hand; run `go tool task generate` after editing the YAML.
package gen

//go:generate go tool oapi-codegen -config oapi-codegen.yaml ../openapi/ride.yaml
//go:generate go tool oapi-codegen -config client.yaml ../openapi/ride.yaml
