package server

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// TestServer runs the server package's own specs: pure rules that are cheaper to pin down
// here than through HTTP. The HTTP behaviour is specified in tests/.
func TestServer(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Server")
}
