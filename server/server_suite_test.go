package server

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// TestServer runs the package's unit specs: pure rules of the server that need no HTTP.
// The HTTP behaviour is specified in tests/, over a real server.
func TestServer(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "server")
}
