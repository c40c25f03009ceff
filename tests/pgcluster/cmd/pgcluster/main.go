// Command pgcluster brings the topology of package pgcluster up on fixed loopback ports for a
// person to use: a PostgreSQL primary, a streaming standby that applies WAL late on purpose,
// and PgBouncer in transaction pooling in front of the primary. `go tool task cluster:up` and
// `cluster:down` run it; see tests/pgcluster/README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/rideapi/ride/tests/pgcluster"
)

const usage = `usage: pgcluster [flags] COMMAND

Commands:
  up              bring the topology up (nothing to do when it is up) and print its URLs
  down            stop every server of the topology and remove its directory
  status          print the URLs of the topology when it is up; exit 1 when it is not
  env             print the URLs as shell variables: eval "$(pgcluster env)"
  standby-stop    stop the standby (-mode fast: sessions end with an error; immediate: cut)
  standby-start   start the standby again; it catches up with what it missed
  replay-pause    stop the standby from applying WAL (nothing written meanwhile reaches it)
  replay-resume   let the standby apply WAL again

Flags:
`

func main() {
	o := pgcluster.Options{}
	flag.StringVar(&o.Dir, "dir", filepath.Join(os.TempDir(), "ride-pgcluster"), "directory of the topology's clusters, configuration and logs")
	flag.IntVar(&o.PrimaryPort, "primary-port", 55432, "the primary's port")
	flag.IntVar(&o.StandbyPort, "standby-port", 55433, "the standby's port")
	flag.IntVar(&o.BouncerPort, "bouncer-port", 56432, "PgBouncer's port")
	flag.DurationVar(&o.ApplyDelay, "apply-delay", pgcluster.DefaultApplyDelay, "the standby's recovery_min_apply_delay (negative: none)")
	flag.IntVar(&o.MaxConnections, "max-connections", pgcluster.DefaultMaxConnections, "the primary's max_connections")
	flag.IntVar(&o.PoolSize, "pool-size", pgcluster.DefaultPoolSize, "PgBouncer's default_pool_size (server connections per database and user)")
	mode := flag.String("mode", string(pgcluster.StopFast), "standby-stop: fast or immediate")
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), usage)
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, flag.Arg(0), o, pgcluster.StopMode(*mode)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, command string, o pgcluster.Options, mode pgcluster.StopMode) error {
	switch command {
	case "up":
		t, err := pgcluster.Start(ctx, o)
		if err != nil {
			return err
		}
		if t.StartedIn > 0 {
			fmt.Printf("Topology up in %s, in %s:\n", t.StartedIn.Round(100*time.Millisecond), t.Dir)
		} else {
			fmt.Printf("Topology already up, in %s:\n", t.Dir)
		}
		describe(t)
		return nil
	case "down":
		// Up, half up or down: whatever runs there stops all the same.
		if err := (&pgcluster.Topology{Dir: o.Dir}).Stop(); err != nil {
			return err
		}
		fmt.Printf("Topology down, %s removed.\n", o.Dir)
		return nil
	case "status", "env":
		t, err := pgcluster.Attach(ctx, o.Dir)
		if err != nil {
			return err
		}
		if command == "env" {
			fmt.Printf("PGCLUSTER_PRIMARY_URL='%s'\nPGCLUSTER_STANDBY_URL='%s'\nPGCLUSTER_BOUNCER_URL='%s'\n",
				t.PrimaryURL("postgres"), t.StandbyURL("postgres"), t.BouncerURL("postgres"))
			return nil
		}
		describe(t)
		return nil
	}
	// The standby may be down on purpose: these commands need the topology's record only.
	t, err := pgcluster.Load(o.Dir)
	if err != nil {
		return err
	}
	switch command {
	case "standby-stop":
		if err := t.StopStandby(ctx, mode); err != nil {
			return err
		}
		fmt.Println("Standby stopped; the primary keeps the WAL it misses.")
	case "standby-start":
		if err := t.StartStandby(ctx); err != nil {
			return err
		}
		fmt.Println("Standby streaming again.")
	case "replay-pause":
		if err := t.PauseReplay(ctx); err != nil {
			return err
		}
		fmt.Println("Standby replay paused.")
	case "replay-resume":
		if err := t.ResumeReplay(ctx); err != nil {
			return err
		}
		fmt.Println("Standby replay resumed.")
	default:
		flag.Usage()
		os.Exit(2)
	}
	return nil
}

func describe(t *pgcluster.Topology) {
	fmt.Printf("  primary    %s   max_connections %d\n", t.PrimaryURL("postgres"), t.MaxConnections)
	fmt.Printf("  standby    %s   applies each commit %s after it\n", t.StandbyURL("postgres"), t.ApplyDelay)
	fmt.Printf("  pgbouncer  %s   transaction pooling, %d server connections per database and user\n", t.BouncerURL("postgres"), t.PoolSize)
	fmt.Printf("PgBouncer serves every database of the primary, the standby replays them all:\n")
	fmt.Printf("  psql '%s' -c 'CREATE DATABASE ride'\n", t.PrimaryURL("postgres"))
	fmt.Printf("  DATABASE_URL='%s' go run ./server/cmd/rideapi\n", t.BouncerURL("ride"))
}
