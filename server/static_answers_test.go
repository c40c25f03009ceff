package server

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/rideapi/ride/store/storetest"
)

// discardWriter is a ResponseWriter that keeps nothing of the body, so that a test counts
// only what the server allocates.
type discardWriter struct{ header http.Header }

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }

// The published documents and the reference page's assets are served from the bytes the
// binary holds, not from a copy made for each request: an answer a client never reads keeps
// no megabyte alive, however many such clients there are.
func TestStaticAnswersAreNotCopied(t *testing.T) {
	st := storetest.Open(t, "sqlite://"+filepath.Join(t.TempDir(), "static.db"))
	s, err := New(Config{CursorSecret: []byte("static-cursor-secret-0123456789")},
		Deps{Store: st, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, path := range []string{"/docs/assets/swagger-ui-bundle.js", "/v1/openapi.json", "/v1/openapi.yaml"} {
		size := docSize(t, s, path)
		const requests = 20
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range requests {
			s.ServeHTTP(&discardWriter{header: http.Header{}}, httptest.NewRequest(http.MethodGet, path, nil))
		}
		runtime.ReadMemStats(&after)
		if perRequest := (after.TotalAlloc - before.TotalAlloc) / requests; perRequest > uint64(size)/4 {
			t.Errorf("GET %s allocates %d bytes a request for a body of %d", path, perRequest, size)
		}
	}
}

// docSize is the length of the body path answers with.
func docSize(t *testing.T, s *Server, path string) int {
	t.Helper()
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != http.StatusOK || rec.Body.Len() < 64<<10 {
		t.Fatalf("GET %s: %d, %d bytes: want a large 200", path, rec.Code, rec.Body.Len())
	}
	return rec.Body.Len()
}
