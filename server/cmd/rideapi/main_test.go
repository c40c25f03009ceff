package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/rideapi/ride/server"
	"github.com/rideapi/ride/store"
)

// TestServeUntilDoneDrainsInFlightRequests is SIGTERM during a slow request: the request
// finishes with its answer, new connections are refused, and serveUntilDone returns cleanly.
// It also checks that the server listens, not ready, while prepare (migrations) runs.
func TestServeUntilDoneDrainsInFlightRequests(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "ride.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := server.New(server.Config{CursorSecret: []byte("main-test-secret-0123456789")}, server.Deps{Store: st})
	if err != nil {
		t.Fatal(err)
	}

	entered, release := make(chan struct{}), make(chan struct{})
	mux := http.NewServeMux()
	mux.Handle("/", srv)
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		_, _ = io.WriteString(w, "finished")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	client := &http.Client{Timeout: 10 * time.Second}

	sigterm, cancel := context.WithCancel(ctx)
	defer cancel()
	migrating, migrated := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- serveUntilDone(sigterm, ln, mux, srv, slog.New(slog.NewTextHandler(io.Discard, nil)), func(ctx context.Context) error {
			close(migrating)
			<-migrated
			return st.Migrate(ctx)
		})
	}()

	<-migrating
	if status := get(t, client, base+"/readyz"); status != http.StatusServiceUnavailable {
		t.Fatalf("/readyz while migrating = %d, want 503", status)
	}
	if status := get(t, client, base+"/healthz"); status != http.StatusOK {
		t.Fatalf("/healthz while migrating = %d, want 200", status)
	}
	close(migrated)
	deadline := time.Now().Add(10 * time.Second)
	for get(t, client, base+"/readyz") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("/readyz never became 200 after migrations")
		}
		time.Sleep(10 * time.Millisecond)
	}

	slow := make(chan string, 1)
	go func() {
		res, err := client.Get(base + "/slow")
		if err != nil {
			slow <- "error: " + err.Error()
			return
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		slow <- res.Status + " " + string(body)
	}()
	<-entered
	cancel() // SIGTERM

	// The listener closes at once; the request in flight goes on.
	deadline = time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
		if err != nil {
			break
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting connections after SIGTERM")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("serveUntilDone returned (%v) while a request was in flight", err)
	case <-time.After(50 * time.Millisecond):
	}

	close(release)
	if got := <-slow; got != "200 OK finished" {
		t.Fatalf("in-flight request during shutdown: %s", got)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serveUntilDone: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serveUntilDone did not return after the drain")
	}
}

func get(t *testing.T, client *http.Client, url string) int {
	t.Helper()
	res, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}
