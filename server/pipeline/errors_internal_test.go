package pipeline

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

// A panic must reach the client as a bare 500 problem: its text belongs in the log only.
func TestPanicBecomesOpaque500(t *testing.T) {
	var logged strings.Builder
	pl := &Pipeline{log: slog.New(slog.NewTextHandler(&logged, nil))}
	e := echo.New()
	req := httptest.NewRequest(http.MethodGet, "/v1/trips", nil)
	req = req.WithContext(WithRequestID(req.Context(), "req_test"))
	rec := httptest.NewRecorder()
	c := e.NewContext(req, rec)

	handler := RecoverPanics(func(echo.Context) error { panic("db password is hunter2") })
	pl.Render(handler(c), c)

	res := rec.Result()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", res.StatusCode)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q", ct)
	}
	if strings.Contains(string(body), "hunter2") || strings.Contains(string(body), "panic") {
		t.Fatalf("500 body leaks the cause: %s", body)
	}
	var p map[string]any
	if err := json.Unmarshal(body, &p); err != nil || p["code"] != "internal" || p["request_id"] != "req_test" {
		t.Fatalf("body %s (%v)", body, err)
	}
	if !strings.Contains(logged.String(), "hunter2") || !strings.Contains(logged.String(), "req_test") {
		t.Fatalf("the log must keep the cause and the request id: %s", logged.String())
	}
}
