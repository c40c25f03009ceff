package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rideapi/ride/store"
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
	var hits int64
	st.DB().Raw("SELECT count(*) FROM api_keys WHERE hash = ? OR id = ?", key, key).Scan(&hits)
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

func TestHelpListsEveryVariable(t *testing.T) {
	out, _, err := runCmd(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"RIDE_ADDR", "DATABASE_URL", "RIDE_DEMO_DATA", "RIDE_CURSOR_SECRET", "keys create", "migrate"} {
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
