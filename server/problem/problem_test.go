package problem_test

import (
	"testing"

	"github.com/rideapi/ride/server/problem"
)

// /docs/problems renders the catalogue: every code needs a title, a meaning and an error status.
func TestEveryCodeIsExplained(t *testing.T) {
	kinds := problem.Catalogue()
	if len(kinds) == 0 {
		t.Fatal("the catalogue is empty")
	}
	for _, k := range kinds {
		if k.Title == "" || k.Meaning == "" {
			t.Errorf("%s: explain it in codes.go (title %q, meaning %q)", k.Code, k.Title, k.Meaning)
		}
		if k.Status < 400 || k.Status > 599 {
			t.Errorf("%s: status %d is not an error status", k.Code, k.Status)
		}
	}
}

func TestErrorTakesStatusAndTitleFromTheCatalogue(t *testing.T) {
	e := problem.New(problem.RateLimited, "slow down")
	if e.HTTPStatus() != 429 || e.Title() != "Rate limited" {
		t.Fatalf("got %d %q", e.HTTPStatus(), e.Title())
	}
	e.Status = 503
	if e.HTTPStatus() != 503 {
		t.Fatalf("an explicit status must win, got %d", e.HTTPStatus())
	}
	if got := (&problem.Error{Code: "no_such_code"}).HTTPStatus(); got != 500 {
		t.Fatalf("an unknown code must answer 500, got %d", got)
	}
}
