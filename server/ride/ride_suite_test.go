package ride_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestRide(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Ride domain")
}
