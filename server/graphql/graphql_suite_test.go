package graphql

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// TestGraphQL runs the query interface's own specs (document analysis); its HTTP behaviour is
// specified in tests/.
func TestGraphQL(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "GraphQL")
}
