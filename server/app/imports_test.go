package app_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The rules know nothing of HTTP: not net/http, and none of the packages the API's HTTP side is
// built of (the router, the validator, the generated types, the request pipeline), however
// indirectly.
func TestKnowsNothingOfHTTP(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{join .Imports \"\\n\"}}", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range strings.Fields(string(out)) {
		if imp == "net/http" {
			t.Errorf("package app imports net/http")
		}
	}
	out, err = exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, http := range []string{"github.com/labstack/echo", "github.com/getkin/kin-openapi",
			"github.com/rideapi/ride/gen", "github.com/rideapi/ride/server/pipeline", "github.com/graph-gophers/graphql-go"} {
			if dep == http || strings.HasPrefix(dep, http+"/") {
				t.Errorf("package app depends on %s", dep)
			}
		}
	}
}
