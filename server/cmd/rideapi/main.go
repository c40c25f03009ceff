// Command rideapi serves Ride API and administers its database.
//
//	rideapi                      serve (migrates, seeds demo data into an empty database)
//	rideapi migrate              apply migrations and exit
//	rideapi keys create --role rider|driver|admin [--subject ID] [--account ID]
//	rideapi keys list [--account ID]
//	rideapi keys revoke [--account ID] KEY_ID
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/rideapi/ride/server/app"

	"github.com/rideapi/ride/server"
	"github.com/rideapi/ride/server/auth"
	"github.com/rideapi/ride/server/demo"
	"github.com/rideapi/ride/server/pipeline"
	"github.com/rideapi/ride/store"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "rideapi:", err)
		}
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	logs := newLogBuffer(stderr)
	defer logs.Close()
	log := slog.New(flushOnWarn{newLineHandler(logs), logs})
	if len(args) == 0 {
		return serve(ctx, args, stdout, stderr, log)
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr, log)
	case "migrate":
		return migrate(ctx, args[1:], stderr)
	case "keys":
		return keys(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return nil
	default:
		usage(stderr)
		return fmt.Errorf("unknown command %q", args[0])
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `rideapi serves Ride API.

Usage:
  rideapi [serve]       serve the API (applies migrations; seeds demo data into an empty database)
  rideapi migrate       apply database migrations and exit
  rideapi keys create --role rider|driver|admin [--subject ID] [--account ID]
                      [--description TEXT] [--expires RFC3339]
                        create an API key and print it alone on stdout
  rideapi keys list [--account ID]
                        list an account's keys (never their secrets)
  rideapi keys revoke [--account ID] KEY_ID
                        revoke a key; every replica refuses it within 1 second

Environment:
`)
	for _, v := range server.EnvVars {
		fmt.Fprintf(w, "  %-28s default %s\n  %-28s %s\n", v.Name, v.Default, "", v.Meaning)
	}
	fmt.Fprintf(w, "  %-28s default %d while serving\n  %-28s %s\n", "GOGC", serveGCPercent, "",
		"Go's garbage collector target (percent of the live heap); set it to trade memory for CPU")
}

func loadConfig() (server.Config, error) {
	cfg, err := server.ConfigFromEnv(os.Getenv)
	if err != nil {
		return cfg, fmt.Errorf("configuration: %w", err)
	}
	return cfg, nil
}

// migratedStore opens the configured database and applies the migrations, for the commands
// that work on it and exit.
func migratedStore(ctx context.Context) (*store.Store, error) {
	cfg, err := loadConfig()
	if err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, cfg.DatabaseURL, cfg.StoreOptions()...)
	if err != nil {
		return nil, err
	}
	if err := st.Migrate(ctx); err != nil {
		st.Close()
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return st, nil
}

func migrate(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: rideapi migrate\n\nApplies the embedded migrations to DATABASE_URL and exits.")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	st, err := migratedStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	fmt.Fprintln(stderr, "migrations applied")
	return nil
}

// serveGCPercent is the garbage collector's target while serving, unless GOGC is set.
const serveGCPercent = 400

func serve(ctx context.Context, args []string, stdout, stderr io.Writer, log *slog.Logger) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { usage(stderr) }
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	log.Info("configuration", "config", cfg) // Config masks its secrets itself
	if os.Getenv("GOGC") == "" {
		// The live heap is small (tens of MB) and every request allocates afresh, so Go's
		// default (collect when the heap doubles) collects many times a second under load.
		// Collecting at a multiple of the live heap trades a little memory for CPU (see
		// tests/ridebench/README.md); GOGC set in the environment still wins.
		debug.SetGCPercent(serveGCPercent)
	}
	if cfg.CursorSecretGenerated {
		log.Warn("RIDE_CURSOR_SECRET is not set: cursors are signed with a random key and die with this process; set it when running replicas")
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	st, err := store.Open(ctx, cfg.DatabaseURL, append(cfg.StoreOptions(), store.WithLogger(log))...)
	if err != nil {
		return err
	}
	defer st.Close()
	srv, err := server.New(cfg, server.Deps{Store: st, Logger: log, Starting: true})
	if err != nil {
		return err
	}
	if cfg.WebhookInsecure {
		log.Warn("RIDE_WEBHOOK_INSECURE is on: webhooks may call plain-http URLs and private or loopback addresses; never in production")
	}
	// Deferred calls run last in, first out: background work stops before the store closes
	// (serveUntilDone stops it already; this covers the early returns).
	defer srv.Close()
	// Listen before migrating, so that probes get answers (/healthz 200, /readyz 503) while
	// migrations run, and a taken port fails at once.
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	log.Info("listening; not ready until migrations finish", "addr", ln.Addr().String(), "engine", string(st.Engine()))
	prepare := func(ctx context.Context) error {
		if err := st.Migrate(ctx); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		if cfg.DemoData {
			if err := seedDemo(ctx, st, stdout); err != nil {
				return err
			}
			go demo.KeepFleetReporting(ctx, st)
		}
		base := "http://" + cfg.Addr
		if strings.HasPrefix(cfg.Addr, ":") {
			base = "http://localhost" + cfg.Addr
		}
		log.Info("ready", "addr", ln.Addr().String())
		fmt.Fprintf(stdout, "Ride API listening on %s — try: curl -H \"Authorization: Bearer <key>\" %s/v1/trips\n", base, base)
		return nil
	}
	return serveUntilDone(ctx, newFairListener(ln, maxConnections), srv, srv, log, prepare, apiTransport)
}

// transport bounds what one client connection may hold of the server.
type transport struct {
	readHeader, read, write, idle time.Duration
}

// apiTransport suits a JSON API: request headers within 5 s, a whole request (at most 1 MB of
// body) within 15 s, the answer written within 30 s (nothing streams), and a keep-alive
// connection dropped after 60 s idle.
var apiTransport = transport{readHeader: 5 * time.Second, read: 15 * time.Second, write: 30 * time.Second, idle: 60 * time.Second}

// maxConnections caps the open client connections of one process; past it an idle one is
// closed for the newcomer, or, when all are busy, new connections wait in the kernel's backlog
// instead of taking file descriptors and memory (fairListener).
const maxConnections = 4096

// shutdownTimeout bounds the drain after SIGTERM; orchestrators usually wait 30 s before they
// kill, so this leaves room for the rest of the shutdown.
const shutdownTimeout = 20 * time.Second

// serveUntilDone serves handler on ln, runs prepare (migrations, demo data) while already
// listening and marks srv ready when it succeeds, and on ctx's end (SIGTERM) shuts down
// gracefully: it stops accepting connections, lets the requests in flight finish, then stops
// the server's background workers. The caller closes the store afterwards.
//
// srv should have been made with Deps.Starting, so that it is not ready until prepare is done.
func serveUntilDone(ctx context.Context, ln net.Listener, handler http.Handler, srv *server.Server, log *slog.Logger, prepare func(context.Context) error, limits transport) error {
	httpServer := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: limits.readHeader,
		ReadTimeout:       limits.read,
		WriteTimeout:      limits.write,
		IdleTimeout:       limits.idle,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// Streams and sockets would hold the drain until its deadline: once the listener has
	// closed, they end, for their clients to reconnect to a replica that serves. So would
	// answers a client does not read: those stuck for a second are cut.
	httpServer.RegisterOnShutdown(srv.EndSessions)
	drained := make(chan struct{})
	defer close(drained)
	if fair, ok := ln.(*fairListener); ok {
		httpServer.RegisterOnShutdown(func() { fair.cutStuckAnswers(drained) })
		httpServer.ConnState = fair.connState
		httpServer.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
			if tc, ok := c.(*trackedConn); ok {
				return pipeline.WithConnectionKeeper(ctx, tc.keep)
			}
			return ctx
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- httpServer.Serve(ln) }()

	err := prepare(ctx)
	if err == nil {
		srv.SetReady(true)
		select {
		case err = <-errc:
		case <-ctx.Done():
		}
	}
	log.Info("shutting down: draining in-flight requests")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	srv.SetReady(false)
	if shutdownErr := httpServer.Shutdown(shutdownCtx); shutdownErr != nil {
		err = errors.Join(err, fmt.Errorf("drain: %w", shutdownErr))
	}
	if workersErr := srv.Shutdown(shutdownCtx); workersErr != nil {
		err = errors.Join(err, workersErr)
	}
	log.Info("stopped")
	return err
}

// seedDemo fills an empty database and prints a key of each role, the only time they can be
// shown: keys are stored hashed.
func seedDemo(ctx context.Context, st *store.Store, stdout io.Writer) error {
	now := time.Now()
	seeded, err := demo.Seed(ctx, st, now)
	if err != nil {
		return fmt.Errorf("seed demo data: %w", err)
	}
	if !seeded.Seeded {
		fmt.Fprintln(stdout, "Database already has trips; no demo data seeded. Create a key with: rideapi keys create --role admin")
		return nil
	}
	keys := []app.APIKeyParams{
		{Role: auth.RoleAdmin, Account: auth.DefaultAccount},
		{Role: auth.RoleRider, Subject: seeded.RiderID, Account: auth.DefaultAccount},
		{Role: auth.RoleDriver, Subject: seeded.DriverID, Account: auth.DefaultAccount},
		{Role: auth.RoleAdmin, Account: demo.PartnerAccount},
		{Role: auth.RoleRider, Subject: seeded.PartnerRiderID, Account: demo.PartnerAccount},
	}
	fmt.Fprintln(stdout, "Demo data seeded. Demo API keys (shown once; only their hashes are stored):")
	for _, k := range keys {
		secret, _, err := app.NewAPIKey(ctx, st, k, now)
		if err != nil {
			return fmt.Errorf("create demo %s key of %s: %w", k.Role, k.Account, err)
		}
		fmt.Fprintln(stdout, strings.TrimRight(fmt.Sprintf("  %-12s  %-6s  %s  %s", k.Account, k.Role, secret, k.Subject), " "))
	}
	return nil
}
