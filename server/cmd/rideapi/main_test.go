package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rideapi/ride/server"
	"github.com/rideapi/ride/store"
	"github.com/rideapi/ride/store/storetest"
)

func runCmd(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

func TestKeysCreatePrintsOnlyTheKey(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ride.db")
	t.Setenv("DATABASE_URL", "sqlite://"+db)

	out, _, err := runCmd(t, "keys", "create", "--role", "admin")
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSuffix(out, "\n")
	if !strings.HasPrefix(key, "rk_") || strings.ContainsAny(key, " \n") {
		t.Fatalf("stdout must be the key alone, got %q", out)
	}

	// Only the hash is stored: the key itself appears nowhere in the database file's rows.
	st, err := store.Open(context.Background(), "sqlite://"+db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hits, err := storetest.CountRows(context.Background(), st, &store.APIKey{}, "hash = ? OR id = ?", key, key)
	if err != nil {
		t.Fatal(err)
	}
	if hits != 0 {
		t.Fatal("the secret is stored in clear")
	}

	if _, _, err := runCmd(t, "keys", "create", "--role", "rider"); err == nil || !strings.Contains(err.Error(), "--subject") {
		t.Fatalf("a rider key without --subject must be refused, got %v", err)
	}
	if _, _, err := runCmd(t, "keys", "create", "--role", "pilot"); err == nil {
		t.Fatal("an unknown role must be refused")
	}
}

func TestDriverKeysArePlatformKeys(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ride.db")
	t.Setenv("DATABASE_URL", "sqlite://"+db)
	ctx := context.Background()
	st := storetest.Open(t, "sqlite://"+db)
	fleet := store.Seed{Drivers: []store.Driver{{ID: "drv_cliplatformaaaaaaaaaaaaaaa", Name: "Driver", City: "cli",
		CreatedAt: time.Now(), UpdatedAt: time.Now()}}, Cities: []store.City{{ID: "cli", Name: "CLI", Currency: "usd",
		RadiusMeters: 1000, CreatedAt: time.Now()}}}
	if _, err := st.SeedIfEmpty(ctx, fleet); err != nil {
		t.Fatal(err)
	}
	_, _, err := runCmd(t, "keys", "create", "--role", "driver", "--subject", "drv_cliplatformaaaaaaaaaaaaaaa", "--account", "acct_partner")
	if err == nil || !strings.Contains(err.Error(), "platform") {
		t.Fatalf("a driver key of another account than the platform's must be refused, got %v", err)
	}
	out, _, err := runCmd(t, "keys", "create", "--role", "driver", "--subject", "drv_cliplatformaaaaaaaaaaaaaaa")
	if err != nil || !strings.HasPrefix(out, "rk_") {
		t.Fatalf("a driver key of the platform: %q, %v", out, err)
	}
}

func TestHelpListsEveryVariable(t *testing.T) {
	out, _, err := runCmd(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"keys create", "migrate"}
	for _, v := range server.EnvVars {
		names = append(names, v.Name)
	}
	for _, name := range names {
		if !strings.Contains(out, name) {
			t.Errorf("--help does not mention %s", name)
		}
	}
}

func TestConfigErrorsNameTheVariable(t *testing.T) {
	t.Setenv("RIDE_DEMO_DATA", "maybe")
	_, _, err := runCmd(t, "migrate")
	if err == nil || !strings.Contains(err.Error(), "RIDE_DEMO_DATA") {
		t.Fatalf("want an error naming RIDE_DEMO_DATA, got %v", err)
	}
}

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
	srv, err := server.New(server.Config{CursorSecret: []byte("main-test-secret-0123456789")}, server.Deps{Store: st, Starting: true})
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
		}, apiTransport)
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

func TestKeysListAndRevoke(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ride.db")
	t.Setenv("DATABASE_URL", "sqlite://"+db)

	if _, _, err := runCmd(t, "keys", "create", "--role", "rider", "--subject", "rdr_nonexistent"); err == nil ||
		!strings.Contains(err.Error(), "rdr_nonexistent") {
		t.Fatalf("a key for a rider that does not exist must be refused, naming it; got %v", err)
	}
	if _, _, err := runCmd(t, "keys", "create", "--role", "admin", "--expires", "2001-01-01T00:00:00Z"); err == nil {
		t.Fatal("a key that expired already must be refused")
	}
	secret, _, err := runCmd(t, "keys", "create", "--role", "admin", "--account", "acct_cli", "--description", "ops laptop")
	if err != nil {
		t.Fatal(err)
	}
	secret = strings.TrimSpace(secret)

	list, _, err := runCmd(t, "keys", "list", "--account", "acct_cli")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "ops laptop") || !strings.Contains(lines[1], secret[:11]) {
		t.Fatalf("keys list must show the key with its prefix and description, got:\n%s", list)
	}
	if strings.Contains(list, secret) {
		t.Fatal("keys list must never show a secret")
	}
	keyID := strings.Fields(lines[1])[0]
	if other, _, _ := runCmd(t, "keys", "list"); strings.Contains(other, keyID) {
		t.Fatal("keys list of another account shows the key")
	}

	if _, _, err := runCmd(t, "keys", "revoke", keyID); err == nil {
		t.Fatal("revoking a key of another account (the default one) must fail")
	}
	out, _, err := runCmd(t, "keys", "revoke", "--account", "acct_cli", keyID)
	if err != nil || !strings.HasPrefix(out, "revoked "+keyID) {
		t.Fatalf("keys revoke: %q, %v", out, err)
	}
	list, _, _ = runCmd(t, "keys", "list", "--account", "acct_cli")
	lines = strings.Split(strings.TrimSpace(list), "\n")
	if fields := strings.Fields(lines[1]); len(fields) < 8 || fields[7] == "-" {
		t.Fatalf("the revoked key must show its revocation time:\n%s", list)
	}
}

func TestKeysHelpSucceeds(t *testing.T) {
	for _, args := range [][]string{
		{"keys", "--help"}, {"keys", "create", "--help"}, {"keys", "list", "-h"}, {"keys", "revoke", "--help"},
	} {
		out, _, err := runCmd(t, args...)
		if err != nil {
			t.Fatalf("%v: help must succeed, got %v", args, err)
		}
		if !strings.Contains(out, "usage") {
			t.Fatalf("%v: help must print the usage on stdout, got %q", args, out)
		}
	}
}

// The guides name the binary's flags; --help must list every one of them, so that a reader
// who tries `rideapi --help` finds what a guide told them to type.
func TestHelpListsEveryFlagTheGuidesName(t *testing.T) {
	out, _, err := runCmd(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	guides := []string{"README.md", "server/README.md", "webhooks/README.md", "openapi/README.md", "schema/README.md"}
	command := regexp.MustCompile(`rideapi (keys (create|list|revoke)|migrate)[^\n` + "`" + `]*`)
	flag := regexp.MustCompile(`--[a-z][a-z-]*`)
	named := 0
	for _, guide := range guides {
		text, err := os.ReadFile(filepath.Join("..", "..", "..", guide))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range command.FindAllString(string(text), -1) {
			for _, f := range flag.FindAllString(line, -1) {
				named++
				if !strings.Contains(out, f+" ") && !strings.Contains(out, f+"]") {
					t.Errorf("%s names %s (%q), which rideapi --help does not list", guide, f, line)
				}
			}
		}
	}
	if named == 0 {
		t.Fatal("no guide names a flag of rideapi: the pattern above no longer matches them")
	}
}
