// Command livebench measures the live side of Ride API on PostgreSQL, with the real server
// binary running as two replicas on one database:
//
//   - position ingest: drivers report batches of positions as fast as the replicas take them,
//     while riders book; booking latency is measured with and without that load;
//   - fan-out: Server-Sent Events streams split over both replicas follow a few trips whose
//     drivers report positions on one replica; the delay from a report to each stream is
//     measured, and each replica's memory per open stream.
//
// Run it with `go tool task bench:live` (see README.md beside this file for the findings).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/rideapi/ride/tests/internal/benchkit"
)

type options struct {
	rideapi  string
	pg       string
	addrs    [2]string
	drivers  int
	workers  int
	batch    int
	rate     int
	duration time.Duration
	trips    int
	streams  int
	reports  int
}

func main() {
	var o options
	flag.StringVar(&o.rideapi, "rideapi", ".bench/rideapi", "the server binary (go build ./server/cmd/rideapi)")
	flag.StringVar(&o.pg, "pg", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "a database of the PostgreSQL server to create the benchmark's own database from")
	flag.StringVar(&o.addrs[0], "addr-a", "127.0.0.1:18180", "address of replica A")
	flag.StringVar(&o.addrs[1], "addr-b", "127.0.0.1:18181", "address of replica B")
	flag.IntVar(&o.drivers, "drivers", 500, "online drivers reporting positions")
	flag.IntVar(&o.workers, "c", 32, "concurrent reporting clients")
	flag.IntVar(&o.batch, "batch", 10, "positions per report")
	flag.IntVar(&o.rate, "rate", 5000, "positions per second to report in the ingest phase; 0: as fast as the replicas answer")
	flag.DurationVar(&o.duration, "d", 10*time.Second, "measured time of the ingest phase")
	flag.IntVar(&o.trips, "trips", 10, "trips the streams follow")
	flag.IntVar(&o.streams, "streams", 1000, "open streams, split over both replicas and all trips")
	flag.IntVar(&o.reports, "reports", 20, "positions each followed trip's driver reports in the fan-out phase")
	flag.Parse()

	benchkit.Main(func(ctx context.Context) error { return run(ctx, o) })
}

func run(ctx context.Context, o options) error {
	b, err := setUp(ctx, o)
	if err != nil {
		return err
	}
	defer b.tearDown()
	fmt.Printf("livebench: 2 replicas of %s on PostgreSQL, %d online drivers\n\n", o.rideapi, o.drivers)

	ingest, err := b.measureIngest(ctx)
	if err != nil {
		return err
	}
	ingest.print(os.Stdout)

	fan, err := b.measureFanOut(ctx)
	if err != nil {
		return err
	}
	fan.print(os.Stdout)
	return nil
}
