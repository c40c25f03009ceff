// Package tests drives the real server over HTTP on every configured engine: SQLite always,
// PostgreSQL too when TEST_DATABASE_URL is set. Every response is validated against
// openapi/ride.yaml.
package tests

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestAPI(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Ride API")
}
