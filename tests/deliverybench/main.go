// Command deliverybench measures webhook delivery on PostgreSQL with the real server binary
// running as three replicas on one database, each with its delivery worker: trips booked and
// moved through the API write the events, a local receiver acknowledges (or in one phase
// refuses one first attempt in ten), and every delivery is timed from the event to its arrival.
// The last phases hold an unrelated transaction open meanwhile: in another database of the
// server, then in the service's own.
//
// Run it with `go tool task bench:deliveries` (see README.md beside this file for the findings).
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
	rideapi   string
	pg        string
	addrs     [3]string
	endpoints int
	movers    int
	drivers   int
	rate      int
	duration  time.Duration
	stray     time.Duration
	failEvery int
}

func main() {
	var o options
	flag.StringVar(&o.rideapi, "rideapi", ".bench/rideapi", "the server binary (go build ./server/cmd/rideapi)")
	flag.StringVar(&o.pg, "pg", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "a database of the PostgreSQL server to create the benchmark's own databases from")
	flag.StringVar(&o.addrs[0], "addr-a", "127.0.0.1:18190", "address of replica A")
	flag.StringVar(&o.addrs[1], "addr-b", "127.0.0.1:18191", "address of replica B")
	flag.StringVar(&o.addrs[2], "addr-c", "127.0.0.1:18192", "address of replica C")
	flag.IntVar(&o.endpoints, "endpoints", 12, "webhook endpoints subscribed to every trip event")
	flag.IntVar(&o.movers, "c", 16, "concurrent clients booking and moving trips")
	flag.IntVar(&o.drivers, "drivers", 60, "online drivers")
	flag.IntVar(&o.rate, "rate", 100, "trip moves (events) per second over all replicas; 0: as fast as the replicas answer")
	flag.DurationVar(&o.duration, "d", 15*time.Second, "measured time of the acknowledging and the failing phase")
	flag.DurationVar(&o.stray, "stray", 30*time.Second, "how long the unrelated transaction stays open, and each of the last two phases lasts")
	flag.IntVar(&o.failEvery, "fail-every", 10, "in the failing phase the receiver refuses one first attempt in this many")
	flag.Parse()

	benchkit.Main(func(ctx context.Context) error { return run(ctx, o) })
}

func run(ctx context.Context, o options) error {
	b, err := setUp(ctx, o)
	if err != nil {
		return err
	}
	defer b.tearDown()
	fmt.Printf("deliverybench: 3 replicas of %s on PostgreSQL, %d endpoints subscribed to every trip event, %d clients moving trips at %s\n\n",
		o.rideapi, o.endpoints, o.movers, rateText(o.rate))

	phases := []phase{
		{name: "Receiver acknowledges every attempt", duration: o.duration},
		{name: fmt.Sprintf("Receiver refuses 1 first attempt in %d (500)", o.failEvery), duration: o.duration, failEvery: o.failEvery},
		{name: fmt.Sprintf("A transaction open for %s in another database of the server", o.stray), duration: o.stray, strayElsewhere: true},
		{name: fmt.Sprintf("A transaction idle for %s in the service's own database", o.stray), duration: o.stray, strayHere: true},
	}
	for _, p := range phases {
		res, err := b.measure(ctx, p)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		res.print(os.Stdout)
	}
	return nil
}

func rateText(rate int) string {
	if rate == 0 {
		return "full speed"
	}
	return fmt.Sprintf("%d events/s", rate)
}
